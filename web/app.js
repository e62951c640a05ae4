// SPDX-License-Identifier: MIT
// The agents simulation (quadgrid-bench's `agents` workload: N squares
// moving in straight lines, bouncing off the world's edges) in the browser:
// each frame the agents move (in WebAssembly, apps/common/workload.c), the
// index takes every move in one batch, and every overlapping pair comes
// back in one Int32Array; colliding agents are drawn red. With level walls,
// static tiles join the index (never paired with each other) and an agent
// that touches one turns back. The frame time is split into update
// (motion + moves + cleanup), pairs and draw; "sim + index" leaves drawing out.
//
// URL parameters set the controls: ?kind=grid&n=100000&walls=1&cells=0&draw=1
import { init, Index, Agents, kinds, build } from "../bindings/js/index.js";

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const canvas = $("view");
const ctx = canvas.getContext("2d");
const W = canvas.width, H = canvas.height;
const image = ctx.createImageData(W, H);
const pixels = new Uint32Array(image.data.buffer);

await init();
for (const k of kinds) $("kind").add(new Option(k, k));
$("kind").value = params.get("kind") || "grid";
if (params.get("n")) {
  if (![...$("count").options].some((o) => o.value === params.get("n"))) $("count").add(new Option(params.get("n")));
  $("count").value = params.get("n");
}
$("walls").checked = params.get("walls") === "1";
$("cells").checked = params.get("cells") === "1";
$("draw").checked = params.get("draw") !== "0";

let sim = null;
const history = { update: [], pairs: [], draw: [], frame: [] };
const HISTORY = 60;

/** Wall tiles: 16-unit squares over ~8% of the world, in short runs (a level's walls), seeded. */
function makeWalls(world) {
  const G = Math.max(1, Math.floor(world / 16));
  let s = 12345;
  const rnd = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 4294967296);
  const tiles = [];
  const want = Math.floor(G * G * 0.08);
  const used = new Set();
  while (tiles.length < want * 4) {
    let x = Math.floor(rnd() * G), y = Math.floor(rnd() * G);
    const horiz = rnd() < 0.5, len = 3 + Math.floor(rnd() * 10);
    for (let k = 0; k < len && tiles.length < want * 4; k++) {
      const tx = horiz ? x + k : x, ty = horiz ? y : y + k;
      if (tx >= G || ty >= G || used.has(ty * G + tx)) continue;
      used.add(ty * G + tx);
      tiles.push(tx * 16, ty * 16, tx * 16 + 16, ty * 16 + 16);
    }
  }
  return new Float32Array(tiles);
}

function start() {
  if (sim) {
    sim.index.free();
    sim.agents.free();
  }
  const n = Number($("count").value), kind = $("kind").value;
  const agents = new Agents(n);
  const world = agents.world;
  // quadgrid-bench's configuration (apps/bench): element size 5, the point grid's size bound 8.
  const index = new Index({ kind, bounds: [0, 0, world, world], elementSize: 5, maxElementSize: $("walls").checked ? 16 : 8 });
  const handles = index.insert(agents.boxes);
  let walls = null;
  if ($("walls").checked) {
    walls = makeWalls(world);
    const wh = index.insert(walls);
    index.setStatic(wh);
  }
  index.cleanup();
  sim = { n, kind, agents, world, index, handles, walls, hit: new Uint8Array(n), inWall: new Uint8Array(n), pairs: 0, wallPairs: 0, frame: 0 };
  for (const k in history) history[k].length = 0;
}

function step() {
  const s = sim;
  const t0 = performance.now();
  s.agents.move();
  s.index.move(s.handles, s.agents.boxes);
  s.index.cleanup();
  const t1 = performance.now();
  const p = s.index.pairs();
  const t2 = performance.now();
  // Response (outside the timed simulation + index): colour the colliding
  // agents; with walls, an agent that newly touches a wall turns back.
  const n = s.n, hit = s.hit;
  hit.fill(0);
  let wallPairs = 0;
  const touching = s.walls ? new Uint8Array(n) : null;
  for (let i = 0; i < p.length; i += 2) {
    const a = p[i], b = p[i + 1]; // a < b: agents come before walls
    if (b >= n) {
      wallPairs++;
      touching[a] = 1;
      hit[a] = 2;
    } else {
      if (hit[a] === 0) hit[a] = 1;
      if (hit[b] === 0) hit[b] = 1;
    }
  }
  if (touching) {
    const vx = s.agents.field("vx"), vy = s.agents.field("vy");
    for (let i = 0; i < n; i++) {
      if (touching[i] && !s.inWall[i]) (vx[i] = -vx[i]), (vy[i] = -vy[i]);
      s.inWall[i] = touching[i];
    }
  }
  s.pairs = p.length / 2 - wallPairs;
  s.wallPairs = wallPairs;
  s.frame++;
  return [t1 - t0, t2 - t1];
}

function draw() {
  const s = sim;
  const scale = W / s.world;
  pixels.fill(0xff000000);
  const put = (x0, y0, x1, y1, color) => {
    const ax = Math.max(0, Math.floor(x0 * scale)), bx = Math.min(W - 1, Math.floor(x1 * scale));
    const ay = Math.max(0, Math.floor(y0 * scale)), by = Math.min(H - 1, Math.floor(y1 * scale));
    for (let y = ay; y <= by; y++) for (let x = ax, o = y * W; x <= bx; x++) pixels[o + x] = color;
  };
  if (s.walls) for (let i = 0; i < s.walls.length; i += 4) put(s.walls[i], s.walls[i + 1], s.walls[i + 2] - 0.01, s.walls[i + 3] - 0.01, 0xff604838);
  const b = s.agents.boxes, hit = s.hit;
  // ABGR: calm agents grey-blue, colliding red, touching a wall yellow.
  const colors = [0xffc0a080, 0xff3030ff, 0xff30e0ff];
  for (let i = 0, n = s.n; i < n; i++) put(b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3], colors[hit[i]]);
  ctx.putImageData(image, 0, 0);
  if ($("cells").checked) {
    const c = s.index.cells();
    if (c.length / 6 <= 50000) {
      ctx.strokeStyle = "rgba(80, 200, 120, 0.35)";
      ctx.lineWidth = 1;
      ctx.beginPath();
      for (let i = 0; i < c.length; i += 6)
        if (c[i + 5] > 0 || s.n <= 10000) ctx.rect(c[i] * scale + 0.5, c[i + 1] * scale + 0.5, (c[i + 2] - c[i]) * scale, (c[i + 3] - c[i + 1]) * scale);
      ctx.stroke();
    }
  }
}

const median = (x) => {
  const a = [...x].sort((p, q) => p - q);
  return a.length ? a[a.length >> 1] : 0;
};

function show() {
  const s = sim;
  const u = median(history.update), p = median(history.pairs), d = median(history.draw);
  const simFps = 1000 / (u + p);
  const st = {
    build: build(), kind: s.kind, n: s.n, frame: s.frame, pairs: s.pairs, wallPairs: s.wallPairs,
    updateMs: u, pairsMs: p, drawMs: d, simIndexMs: u + p, simIndexFps: simFps,
    frameFps: 1000 / median(history.frame), walls: s.walls ? s.walls.length / 4 : 0,
  };
  window.qgStats = st;
  $("stats").innerHTML =
    `build ${st.build}   kind ${st.kind}   agents ${st.n.toLocaleString()}   walls ${st.walls}   frame ${st.frame}\n` +
    `update ${u.toFixed(2)} ms   pairs ${p.toFixed(2)} ms   draw ${d.toFixed(2)} ms   (medians of ${history.update.length} frames)\n` +
    `sim + index ${(u + p).toFixed(2)} ms = <span class="${simFps >= 60 ? "ok" : "bad"}">${simFps.toFixed(0)} fps</span>` +
    `   page ${st.frameFps.toFixed(0)} fps   colliding pairs ${s.pairs.toLocaleString()}` +
    (s.walls ? `   agent-wall pairs ${s.wallPairs.toLocaleString()}` : "") +
    (window.qgCheckResult ? `\ncheck: ${window.qgCheckResult.text}` : "");
}

let last = performance.now();
function frame() {
  const [u, p] = step();
  const t = performance.now();
  if ($("draw").checked) draw();
  const d = performance.now() - t;
  const now = performance.now();
  for (const [k, v] of [["update", u], ["pairs", p], ["draw", d], ["frame", now - last]]) {
    history[k].push(v);
    if (history[k].length > HISTORY) history[k].shift();
  }
  last = now;
  if (sim.frame % 10 === 0) show();
  requestAnimationFrame(frame);
}

/**
 * The page's self-check: n agents (small), `frames` frames of the same
 * motion, every frame's pairs from the index against an O(n^2) brute force
 * over the same boxes, with every kind. Returns { ok, frames, pairs, text }.
 */
window.qgCheck = (n = 2000, frames = 20) => {
  let ok = true, total = 0;
  for (const kind of kinds) {
    const agents = new Agents(n);
    const index = new Index({ kind, bounds: [0, 0, agents.world, agents.world], elementSize: 5, maxElementSize: 8 });
    const h = index.insert(agents.boxes);
    for (let f = 0; f < frames; f++) {
      agents.move();
      index.move(h, agents.boxes);
      index.cleanup();
      const got = Array.from(index.pairs(), Number);
      const b = agents.boxes;
      const want = [];
      for (let i = 0; i < n; i++)
        for (let j = i + 1; j < n; j++)
          if (b[4 * i] <= b[4 * j + 2] && b[4 * j] <= b[4 * i + 2] && b[4 * i + 1] <= b[4 * j + 3] && b[4 * j + 1] <= b[4 * i + 3]) want.push(i * n + j);
      const keys = [];
      for (let i = 0; i < got.length; i += 2) keys.push(Math.min(got[i], got[i + 1]) * n + Math.max(got[i], got[i + 1]));
      keys.sort((x, y) => x - y);
      if (keys.length !== want.length || keys.some((k, i) => k !== want[i])) ok = false;
      total += want.length;
    }
    index.free();
    agents.free();
  }
  const text = `${ok ? "ok" : "MISMATCH"}: ${kinds.length} kinds x ${frames} frames of ${n} agents, ${total} pairs, equal to brute force`;
  window.qgCheckResult = { ok, frames, pairs: total, text };
  return window.qgCheckResult;
};

for (const id of ["kind", "count", "walls"]) $(id).addEventListener("change", start);
$("check").addEventListener("click", () => {
  window.qgCheck();
  show();
});
start();
requestAnimationFrame(frame);
