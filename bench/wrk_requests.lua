-- Replays pre-signed deliveries for wrk: each line of the file is "signature<TAB>body".
-- Arguments (after --): the file and the number of wrk threads. Each thread takes its own
-- stripe of the lines, so no two threads send the same delivery; a thread that runs out
-- starts over (its deliveries then become duplicates: size the file for the run).
local started = 0

function setup(thread)
  thread:set("index", started)
  started = started + 1
end

function init(args)
  local total = tonumber(args[2])
  requests = {}
  counter = 0
  local n = 0
  for line in io.lines(args[1]) do
    if n % total == index then
      local tab = line:find("\t", 1, true)
      local headers = {
        ["Stripe-Signature"] = line:sub(1, tab - 1),
        ["Content-Type"] = "application/json",
      }
      requests[#requests + 1] = wrk.format("POST", nil, headers, line:sub(tab + 1))
    end
    n = n + 1
  end
end

function request()
  counter = counter + 1
  if counter > #requests then
    counter = 1
  end
  return requests[counter]
end
