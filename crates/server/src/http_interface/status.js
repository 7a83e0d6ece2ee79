// The status page: polls /status.json every second, fills the tables and draws the
// operations-per-second and latency charts from the differences between samples.
"use strict";

const HISTORY = 60; // samples kept per chart
const COLORS = ["#2f6f4f", "#c2571a", "#3465a4", "#a33b6b", "#7a6a00", "#4b8b9b"];
const OP_TYPES = ["insert", "query", "update", "delete", "getmore", "command"];

const state = { previous: null, ops: {}, latency: {}, samples: 0 };

function text(id, value) {
  document.getElementById(id).textContent = value;
}

function bytes(n) {
  const units = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

function duration(seconds) {
  const d = Math.floor(seconds / 86400), h = Math.floor(seconds % 86400 / 3600);
  const m = Math.floor(seconds % 3600 / 60), s = Math.floor(seconds % 60);
  return d ? `${d}d ${h}h ${m}m` : h ? `${h}h ${m}m ${s}s` : `${m}m ${s}s`;
}

function number(value) {
  if (value && typeof value === "object") {
    return Number(value.$numberLong ?? value.$numberInt ?? value.$numberDouble ?? 0);
  }
  return Number(value ?? 0);
}

function cell(row, value, className) {
  const td = row.insertCell();
  td.textContent = value;
  if (className) td.className = className;
  return td;
}

function fill(tableId, rows, columns, emptyText) {
  const body = document.querySelector(`#${tableId} tbody`);
  body.replaceChildren();
  if (!rows.length) {
    const row = body.insertRow();
    row.className = "empty";
    const td = cell(row, emptyText);
    td.colSpan = columns;
    return;
  }
  for (const values of rows) {
    const row = body.insertRow();
    for (const [value, className] of values) {
      if (className === "code") {
        const code = document.createElement("code");
        code.textContent = value;
        row.insertCell().appendChild(code);
      } else {
        cell(row, value, className);
      }
    }
  }
}

function push(series, name, value) {
  (series[name] ??= []).push(value);
  if (series[name].length > HISTORY) series[name].shift();
}

function draw(svgId, legendId, series) {
  const svg = document.getElementById(svgId);
  const names = Object.keys(series).filter((n) => series[n].some((v) => v > 0));
  const max = Math.max(1e-9, ...names.flatMap((n) => series[n]));
  const ns = "http://www.w3.org/2000/svg";
  svg.replaceChildren();
  const label = document.createElementNS(ns, "text");
  label.setAttribute("x", "4");
  label.setAttribute("y", "12");
  label.textContent = `max ${max < 10 ? max.toFixed(2) : Math.round(max)}`;
  svg.appendChild(label);
  const legend = document.getElementById(legendId);
  legend.replaceChildren();
  names.forEach((name, i) => {
    const values = series[name];
    const points = values.map((v, j) => {
      const x = (600 * (HISTORY - values.length + j)) / (HISTORY - 1);
      const y = 156 - (140 * v) / max;
      return `${x.toFixed(1)},${y.toFixed(1)}`;
    });
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", points.join(" "));
    line.setAttribute("stroke", COLORS[i % COLORS.length]);
    line.dataset.series = name;
    svg.appendChild(line);
    const item = document.createElement("li");
    const swatch = document.createElement("i");
    swatch.style.background = COLORS[i % COLORS.length];
    const last = values[values.length - 1];
    item.append(swatch, `${name} ${last.toFixed(last < 10 ? 2 : 0)}`);
    legend.appendChild(item);
  });
}

function render(status) {
  text("host", status.host);
  text("summary", `MongoDB ${status.version} compatible · Basalt ${status.basaltVersion} · pid ${number(status.pid)}`);
  text("uptime", duration(number(status.uptimeSeconds)));
  text("connections", `${number(status.connections.current)} open, ${number(status.connections.active)} active`);
  text("memory", `${bytes(number(status.memory.residentBytes))} resident`);

  const now = Date.now() / 1000;
  if (state.previous) {
    const seconds = Math.max(0.001, now - state.previous.at);
    let total = 0;
    for (const type of OP_TYPES) {
      const rate = (number(status.opcounters[type]) - number(state.previous.status.opcounters[type])) / seconds;
      total += Math.max(0, rate);
      push(state.ops, type, Math.max(0, rate));
    }
    text("ops-now", total.toFixed(total < 10 ? 1 : 0));
    for (const [command, figures] of Object.entries(status.latencies)) {
      const before = state.previous.status.latencies[command];
      const count = number(figures.count) - number(before?.count);
      const micros = number(figures.micros) - number(before?.micros);
      push(state.latency, command, count > 0 ? micros / count / 1000 : 0);
    }
    draw("ops-chart", "ops-legend", state.ops);
    draw("latency-chart", "latency-legend", state.latency);
  }
  state.previous = { at: now, status };
  state.samples += 1;
  document.body.dataset.samples = String(state.samples);

  const collections = [];
  for (const db of status.databases) {
    for (const c of db.collections) {
      collections.push([
        [`${db.name}.${c.name}${c.capped ? " (capped)" : ""}`],
        [number(c.count).toLocaleString("en"), "num"],
        [bytes(number(c.size)), "num"],
        [c.indexes.join(", ")],
      ]);
    }
  }
  fill("collections", collections, 4, "no collections");

  // Index builds have no opid; drivers' monitors wait in hello, doing nothing.
  const waiting = (op) => op.command && ("hello" in op.command || "isMaster" in op.command);
  const running = status.operations.filter((op) => op.opid !== undefined && !waiting(op));
  fill("operations", running.map((op) => [
    [String(number(op.opid))],
    [op.op],
    [op.ns],
    [`${(number(op.microsecs_running) / 1000).toFixed(1)} ms`, "num"],
    [op.client ?? ""],
    [JSON.stringify(op.command), "code"],
  ]), 6, "nothing running");

  fill("slow", status.slowOperations.map((op) => [
    [new Date(op.ts?.$date ?? op.ts).toLocaleTimeString()],
    [op.op],
    [op.ns],
    [String(number(op.millis)), "num"],
    [op.planSummary ?? ""],
    [`${number(op.keysExamined)} keys, ${number(op.docsExamined)} docs / ${number(op.nreturned ?? op.ninserted ?? op.nMatched ?? op.ndeleted)}`],
  ]), 6, "no slow operations");

  const replication = status.replication;
  document.getElementById("replication-section").hidden = !replication;
  if (replication) {
    fill("replication", (replication.members ?? []).map((m) => [
      [`${m.name}${m.self ? " (this member)" : ""}`],
      [m.stateStr],
      [String(number(m.health))],
      [m.optimeDate ? new Date(m.optimeDate.$date ?? m.optimeDate).toLocaleTimeString() : ""],
    ]), 4, replication.error ?? "no members");
  }
}

async function refresh() {
  try {
    const response = await fetch("/status.json", { cache: "no-store" });
    render(await response.json());
  } catch (error) {
    text("summary", `cannot reach the server: ${error}`);
  }
}

refresh();
setInterval(refresh, 1000);
