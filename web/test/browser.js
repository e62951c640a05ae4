// SPDX-License-Identifier: MIT
// The page in a real browser: Debian's chromium (headless) driven by
// puppeteer-core. Serves the repository root on a local port, opens
// web/?n=100000, lets it run, reads the figures the page shows (window.qgStats),
// runs the page's own brute-force check at a small count with every kind,
// and saves a screenshot to docs/web.png.
//
//   node browser.js [--kind grid] [--seconds 6] [--screenshot ../../docs/web.png] [--require-fps 60]
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import os from "node:os";
import { fileURLToPath } from "node:url";
import puppeteer from "puppeteer-core";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith("--") ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const kind = args.kind || "grid";
const seconds = Number(args.seconds || 6);
const shot = path.resolve(args.screenshot || path.join(root, "docs/web.png"));
const requireFps = Number(args["require-fps"] || 0);
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";

const types = { ".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript", ".css": "text/css", ".png": "image/png" };
const server = http.createServer((req, res) => {
  const url = new URL(req.url, "http://x");
  let file = path.join(root, decodeURIComponent(url.pathname));
  if (!file.startsWith(root)) return res.writeHead(403).end();
  if (fs.existsSync(file) && fs.statSync(file).isDirectory()) file = path.join(file, "index.html");
  fs.readFile(file, (err, data) => {
    if (err) return res.writeHead(404).end("not found");
    res.writeHead(200, { "content-type": types[path.extname(file)] || "application/octet-stream" }).end(data);
  });
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const port = server.address().port;

const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), "qg-chromium-"));
const browser = await puppeteer.launch({
  executablePath,
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", `--user-data-dir=${userDataDir}`],
});
let failed = false;
try {
  const page = await browser.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  await page.setViewport({ width: 840, height: 990 });
  const url = `http://127.0.0.1:${port}/web/?kind=${kind}&n=100000`;
  await page.goto(url, { waitUntil: "load" });
  await page.waitForFunction(() => window.qgStats && window.qgStats.frame >= 10, { timeout: 60000 });
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const stats = await page.evaluate(() => window.qgStats);
  console.log(`browser: ${await browser.version()}, ${url}`);
  console.log(`browser: ${JSON.stringify(stats)}`);
  if (!(stats.n === 100000 && stats.frame > 10 && stats.pairs > 0)) {
    console.log("browser: FAIL: the page did not run 100,000 agents");
    failed = true;
  }
  const check = await page.evaluate(() => window.qgCheck(1500, 10));
  console.log(`browser: check: ${check.text}`);
  if (!check.ok || check.pairs === 0) failed = true;
  console.log(`browser: 100,000 agents, sim + index ${stats.simIndexMs.toFixed(2)} ms = ${stats.simIndexFps.toFixed(0)} fps (drawing excluded), draw ${stats.drawMs.toFixed(2)} ms`);
  if (requireFps && stats.simIndexFps < requireFps) {
    console.log(`browser: FAIL: below ${requireFps} fps`);
    failed = true;
  }
  await new Promise((r) => setTimeout(r, 500));
  await page.screenshot({ path: shot });
  console.log(`browser: screenshot ${shot}`);
  // The level walls and the cells, at 10,000 agents, every kind.
  for (const k of ["grid", "quadtree", "point_grid"]) {
    await page.goto(`http://127.0.0.1:${port}/web/?kind=${k}&n=10000&walls=1&cells=1`, { waitUntil: "load" });
    await page.waitForFunction(() => window.qgStats && window.qgStats.frame >= 30, { timeout: 60000 });
    const w = await page.evaluate(() => window.qgStats);
    console.log(`browser: walls ${k}: ${w.walls} tiles, ${w.pairs} agent pairs, ${w.wallPairs} agent-wall pairs, frame ${w.frame}`);
    if (!(w.walls > 0 && w.wallPairs > 0 && w.pairs > 0)) failed = true;
  }
  if (errors.length) {
    console.log(`browser: FAIL: page errors: ${errors.join("; ")}`);
    failed = true;
  }
} finally {
  await browser.close();
  server.close();
  fs.rmSync(userDataDir, { recursive: true, force: true });
}
console.log(failed ? "browser: FAIL" : "browser: ok");
process.exit(failed ? 1 : 0);
