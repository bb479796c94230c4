// Official verifiers from npm, as test oracles for hookinbox.testing's signers.
// stdin: {"provider": "github"|"shopify"|"twilio"|"mollie"|"discord"|"standard-v1a"|"twitch"|
//         "zoom"|"linear"|"mux"|"sns", "secret": "...", "headers": {...},
//         "body": "<base64>", "url": "..." (twilio: the URL Twilio called),
//         "signatures": [...] (mollie: every X-Mollie-Signature value),
//         "certificates": {url: pem} (sns: what each SigningCertURL serves),
//         "sign": {...} (discord, standard-v1a, twitch, zoom: sign instead of verifying)}
// stdout: {"valid": true|false, "detail": "..."}, or {"headers": {...}} when signing
// Discord's verifier is discord-interactions' verifyKey. Standard Webhooks v1a, Twitch and Zoom
// have no verifying SDK on npm: their documented recipes, written here on Node's own crypto.
// Each SDK is imported in its own branch: loading all of them costs every call ~0.4 s.
import crypto from "node:crypto";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
// One request, or a list of them answered in order (one Node start for several checks).
const input = JSON.parse(Buffer.concat(chunks).toString());
const answers = [];
for (const request of [].concat(input)) answers.push(await judge(request));
process.stdout.write(JSON.stringify(Array.isArray(input) ? answers : answers[0]));

async function judge(request) {
const body = Buffer.from(request.body, "base64");
const header = (name) =>
  Object.entries(request.headers).find(([key]) => key.toLowerCase() === name)?.[1];

let answer;
if (request.provider === "github") {
  const { verify } = await import("@octokit/webhooks-methods");
  // verify() takes the payload as text; GitHub signs the UTF-8 bytes of it.
  const valid = await verify(request.secret, body.toString("utf8"), header("x-hub-signature-256"));
  answer = { valid, detail: "" };
} else if (request.provider === "shopify") {
  await import("@shopify/shopify-api/adapters/web-api");
  const { shopifyApi, ApiVersion } = await import("@shopify/shopify-api");
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
  const { default: twilio } = await import("twilio");
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
  const { SignatureValidator } = await import("mollie-api-typescript/utils/webhooks/index.js");
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
} else if (request.provider === "mux") {
  // Mux's SDK: webhooks.verifySignature checks Mux-Signature (t=, v1=) over "<t>.<body>" and
  // a 5-minute window on t against the clock; it throws on any failure.
  const { default: Mux } = await import("@mux/mux-node");
  const mux = new Mux({ tokenId: "unused", tokenSecret: "unused", webhookSecret: request.secret });
  let valid = true;
  let detail = "";
  try {
    await mux.webhooks.verifySignature(body.toString("utf8"), request.headers, request.secret);
  } catch (error) {
    valid = false;
    detail = String(error.message);
  }
  answer = { valid, detail };
} else if (request.provider === "sns") {
  // sns-validator fetches the certificate with https.get: answered here from
  // `request.certificates` (URL -> PEM), so the judge needs no network and no AWS key.
  const https = (await import("node:https")).default;
  const { Readable } = await import("node:stream");
  https.get = (url, callback) => {
    const pem = (request.certificates || {})[String(url)];
    const response = Readable.from(pem === undefined ? [] : [Buffer.from(pem)]);
    response.statusCode = pem === undefined ? 404 : 200;
    callback(response);
    return { on: () => {} };
  };
  const { default: MessageValidator } = await import("sns-validator");
  const message = JSON.parse(body.toString("utf8"));
  const valid = await new Promise((resolve) =>
    new MessageValidator().validate(message, (error) => resolve(!error)));
  answer = { valid, detail: "" };
} else if (request.sign) {
  answer = { headers: signed(request, body) };
} else if (request.provider === "discord") {
  const { verifyKey } = await import("discord-interactions");
  const valid = await verifyKey(
    body, header("x-signature-ed25519"), header("x-signature-timestamp"), request.secret);
  answer = { valid, detail: "" };
} else if (request.provider === "standard-v1a") {
  // The spec: ed25519 over "{id}.{timestamp}.{body}", whpk_<base64> public key, v1a entries.
  const key = publicKey(Buffer.from(request.secret.replace(/^whpk_/, ""), "base64"));
  const message = Buffer.concat([
    Buffer.from(`${header("webhook-id")}.${header("webhook-timestamp")}.`), body]);
  const entries = header("webhook-signature").split(" ").map((e) => e.split(","));
  const valid = entries.some(([version, sig]) =>
    version === "v1a" && crypto.verify(null, message, key, Buffer.from(sig, "base64")));
  answer = { valid, detail: "" };
} else if (request.provider === "twitch") {
  // Twitch's documented recipe: HMAC-SHA256 of id + timestamp + body, "sha256=" + hex.
  const expected = "sha256=" + crypto.createHmac("sha256", request.secret)
    .update(header("twitch-eventsub-message-id") + header("twitch-eventsub-message-timestamp"))
    .update(body).digest("hex");
  answer = { valid: same(expected, header("twitch-eventsub-message-signature")), detail: "" };
} else if (request.provider === "zoom") {
  // Zoom's documented recipe: "v0=" + hex HMAC-SHA256 of "v0:{timestamp}:{body}".
  const expected = "v0=" + crypto.createHmac("sha256", request.secret)
    .update(`v0:${header("x-zm-request-timestamp")}:`).update(body).digest("hex");
  answer = { valid: same(expected, header("x-zm-signature")), detail: "" };
  const plain = JSON.parse(body.toString("utf8"))?.payload?.plainToken;
  if (plain !== undefined) {
    // What Zoom expects back from the URL validation.
    answer.encryptedToken = crypto.createHmac("sha256", request.secret).update(plain).digest("hex");
  }
} else {
  answer = { valid: false, detail: `no oracle for ${request.provider}` };
}
return answer;
}

function same(a, b) {
  return typeof b === "string" && a.length === b.length &&
    crypto.timingSafeEqual(Buffer.from(a), Buffer.from(b));
}

function publicKey(raw) {
  return crypto.createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: raw.toString("base64url") }, format: "jwk" });
}

function privateKey(seed) {
  const pair = crypto.createPrivateKey({
    key: Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), seed]),
    format: "der", type: "pkcs8" });
  return pair;
}

// Sign a delivery as the provider would: `how` = {"timestamp", "id", "seed" (hex, ed25519)}.
function signed(request, body) {
  const provider = request.provider;
  const how = request.sign;
  const t = String(how.timestamp);
  if (provider === "discord") {
    const sig = crypto.sign(null, Buffer.concat([Buffer.from(t), body]),
      privateKey(Buffer.from(how.seed, "hex")));
    return { "X-Signature-Ed25519": sig.toString("hex"), "X-Signature-Timestamp": t,
             "Content-Type": "application/json" };
  }
  if (provider === "standard-v1a") {
    const sig = crypto.sign(null, Buffer.concat([Buffer.from(`${how.id}.${t}.`), body]),
      privateKey(Buffer.from(how.seed, "hex")));
    return { "webhook-id": how.id, "webhook-timestamp": t,
             "webhook-signature": `v1a,${sig.toString("base64")}`,
             "Content-Type": "application/json" };
  }
  if (provider === "twitch") {
    const mac = crypto.createHmac("sha256", request.secret).update(how.id + t).update(body);
    return { "Twitch-Eventsub-Message-Id": how.id, "Twitch-Eventsub-Message-Timestamp": t,
             "Twitch-Eventsub-Message-Signature": "sha256=" + mac.digest("hex"),
             "Twitch-Eventsub-Message-Type": how.type || "notification",
             "Content-Type": "application/json" };
  }
  if (provider === "zoom") {
    const mac = crypto.createHmac("sha256", request.secret).update(`v0:${t}:`).update(body);
    return { "x-zm-signature": "v0=" + mac.digest("hex"), "x-zm-request-timestamp": t,
             "Content-Type": "application/json" };
  }
  throw new Error(`cannot sign for ${provider}`);
}
