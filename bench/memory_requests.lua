-- Sends each pre-signed delivery of a file exactly once, then stops (for bench/memory.py).
-- Each line of the file is "signature<TAB>body". Arguments (after --): the file and the number
-- of wrk threads; each thread takes its own stripe of the lines. Once its stripe is sent, a
-- thread asks for GET /healthz (stores nothing) until every delivery has been answered, then
-- stops sending. wrk itself runs until -d or SIGINT: memory.py interrupts it once the database
-- holds every delivery.
local started = 0

function setup(thread)
  thread:set("index", started)
  started = started + 1
end

function init(args)
  local total = tonumber(args[2])
  requests = {}
  -- wrk calls request() once on thread 0 before sending anything, to check what it returns:
  -- that call gets the idle request, so that no delivery is lost to it.
  sent = index == 0 and -1 or 0
  answered = 0
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
  idle = wrk.format("GET", "/healthz")
end

function request()
  sent = sent + 1
  if sent < 1 or sent > #requests then
    return idle
  end
  return requests[sent]
end

function response(status, headers, body)
  answered = answered + 1
  if answered >= #requests then
    wrk.thread:stop()
  end
end
