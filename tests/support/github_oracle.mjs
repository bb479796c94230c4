// octokit (@octokit/rest) pointed at the loopback imitation of GitHub's hook deliveries API:
// reads {base, token, hook, redeliver} as JSON on stdin, pages through every delivery with
// octokit.paginate, asks for the redelivery of `redeliver` (a delivery id), and prints what
// it saw; a refused request prints {"error": status}.
import { Octokit } from "@octokit/rest";

const input = JSON.parse(await new Promise((resolve) => {
  let text = "";
  process.stdin.on("data", (chunk) => (text += chunk));
  process.stdin.on("end", () => resolve(text));
}));
const octokit = new Octokit({ auth: input.token, baseUrl: input.base });
const parts = input.hook.split("/");
const repo = parts[0] === "repos";
const where = repo
  ? { owner: parts[1], repo: parts[2], hook_id: Number(parts[4]) }
  : { org: parts[1], hook_id: Number(parts[3]) };
const api = repo ? octokit.rest.repos : octokit.rest.orgs;
try {
  const deliveries = await octokit.paginate(api.listWebhookDeliveries, { ...where, per_page: 100 });
  let redelivery = null;
  if (input.redeliver !== null) {
    const answer = await api.redeliverWebhookDelivery({ ...where, delivery_id: input.redeliver });
    redelivery = answer.status;
  }
  console.log(JSON.stringify({ guids: deliveries.map((d) => d.guid), redelivery }));
} catch (error) {
  console.log(JSON.stringify({ error: error.status ?? String(error) }));
}
