// Official verifiers from npm, as test oracles for hookinbox.testing's signers.
// stdin: {"provider": "github"|"shopify"|"twilio"|"mollie"|"linear", "secret": "...", "headers": {...},
//         "body": "<base64>", "url": "..." (twilio: the URL Twilio called),
//         "signatures": [...] (mollie: every X-Mollie-Signature value)}
// stdout: {"valid": true|false, "detail": "..."}
import { verify } from "@octokit/webhooks-methods";
import "@shopify/shopify-api/adapters/web-api";
import { shopifyApi, ApiVersion } from "@shopify/shopify-api";
import twilio from "twilio";
import { SignatureValidator } from "mollie-api-typescript/utils/webhooks/index.js";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const request = JSON.parse(Buffer.concat(chunks).toString());
const body = Buffer.from(request.body, "base64");
const header = (name) =>
  Object.entries(request.headers).find(([key]) => key.toLowerCase() === name)?.[1];

let answer;
if (request.provider === "github") {
  // verify() takes the payload as text; GitHub signs the UTF-8 bytes of it.
  const valid = await verify(request.secret, body.toString("utf8"), header("x-hub-signature-256"));
  answer = { valid, detail: "" };
} else if (request.provider === "shopify") {
  const shopify = shopifyApi({
    apiKey: "test-key",
    apiSecretKey: request.secret,
    scopes: [],
    hostName: "example.test",
    apiVersion: ApiVersion.October24,
    isEmbeddedApp: false,
    logger: { level: 0, log: () => {} },
  });
  const rawRequest = new Request("https://example.test/webhooks/shopify", {
    method: "POST",
    headers: request.headers,
    body,
  });
  const result = await shopify.webhooks.validate({ rawBody: body.toString("utf8"), rawRequest });
  answer = { valid: result.valid, detail: JSON.stringify(result) };
} else if (request.provider === "twilio") {
  // validateRequest takes the form's fields; a JSON body goes through validateRequestWithBody.
  const signature = header("x-twilio-signature");
  const algorithm = twilio.getSignatureAlgorithm(header("x-twilio-webhooks-signature-settings"));
  let valid;
  if ((header("content-type") || "").startsWith("application/json")) {
    valid = twilio.validateRequestWithBody(
      request.secret, signature, request.url, body.toString("utf8"), algorithm);
  } else {
    const params = {};
    for (const [name, value] of new URLSearchParams(body.toString("utf8"))) {
      params[name] = name in params ? [].concat(params[name], value) : value;
    }
    valid = twilio.validateRequest(request.secret, signature, request.url, params, algorithm);
  }
  answer = { valid, detail: "" };
} else if (request.provider === "mollie") {
  // The validator takes the header's values apart, as a rotation sends two of them.
  let valid;
  try {
    valid = await SignatureValidator.validate(body.toString("utf8"), request.secret, request.signatures);
  } catch (error) {
    valid = false;
  }
  answer = { valid, detail: "" };
} else if (request.provider === "linear") {
  // verify() checks the signature, then the signed body's webhookTimestamp (60 s window);
  // it throws on any failure.
  const { LinearWebhookClient } = await import("@linear/sdk/webhooks");
  let valid;
  let detail = "";
  try {
    valid = new LinearWebhookClient(request.secret).verify(body, header("linear-signature"));
  } catch (error) {
    valid = false;
    detail = String(error.message);
  }
  answer = { valid, detail };
} else {
  answer = { valid: false, detail: `no oracle for ${request.provider}` };
}
process.stdout.write(JSON.stringify(answer));
