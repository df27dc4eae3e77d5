// The status page: polls /status (cumulative figures, as Prometheus counters are) and turns
// two readings into rates, busy shares and quantiles of the last interval. Text from the
// server (model names, reasons) only ever goes in through textContent.
"use strict";

const REFRESH_MS = 1000;
let previous = null; // the last reading, for rates

function text(node, value) {
  node.textContent = value === null || value === undefined ? "–" : String(value);
}

function duration(seconds) {
  const s = Math.floor(seconds);
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
  return (h ? h + "h " : "") + (h || m ? m + "m " : "") + (s % 60) + "s";
}

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return n.toFixed(i ? 1 : 0) + " " + units[i];
}

function seconds(value) {
  if (value === null || !isFinite(value)) return "–";
  const ms = value * 1000;
  return ms < 1 ? (ms * 1000).toFixed(0) + " µs" : ms < 1000 ? ms.toFixed(ms < 10 ? 2 : 1) + " ms" : value.toFixed(2) + " s";
}

// Counts per bucket (not cumulative) observed between two readings of one histogram.
function bucketDeltas(now, before) {
  if (!now) return null;
  const counts = now.counts.map((n, i) => n - (before && before.bounds.length === now.bounds.length ? before.counts[i] : 0));
  const deltas = counts.map((n, i) => n - (i ? counts[i - 1] : 0));
  return { bounds: now.bounds, deltas: deltas, total: counts[counts.length - 1] };
}

// The q-quantile of bucketed observations, interpolated within its bucket as Prometheus's
// histogram_quantile does; observations past the last bound read as that bound.
function quantile(q, histogram) {
  if (!histogram || histogram.total <= 0) return null;
  const rank = q * histogram.total;
  let seen = 0;
  for (let i = 0; i < histogram.deltas.length; i++) {
    const n = histogram.deltas[i];
    if (n > 0 && seen + n >= rank) {
      if (i >= histogram.bounds.length) return histogram.bounds[histogram.bounds.length - 1];
      const lower = i ? histogram.bounds[i - 1] : 0, upper = histogram.bounds[i];
      return lower + (upper - lower) * ((rank - seen) / n);
    }
    seen += n;
  }
  return histogram.bounds[histogram.bounds.length - 1];
}

function batchSizes(histogram) {
  if (!histogram || !histogram.counts.length) return [];
  const out = [];
  let lower = 0;
  histogram.counts.forEach((cumulative, i) => {
    const n = cumulative - (i ? histogram.counts[i - 1] : 0);
    const upper = i < histogram.bounds.length ? histogram.bounds[i] : Infinity;
    if (n > 0) {
      const label = upper === Infinity ? ">" + lower : (upper - lower <= 1 ? String(upper) : (lower + 1) + "–" + upper);
      out.push(label + ": " + n);
    }
    lower = upper;
  });
  return out;
}

function key(model) { return model.name + "\u0000" + model.version; }

const COLUMNS = ["name", "version", "state", "rps", "p50", "p95", "p99", "queue", "batches", "busy", "cache", "actions"];
// Rows by model and version, kept from one refresh to the next and updated in place, so a
// button does not vanish under the pointer as the page refreshes.
const rows = new Map();

function rowFor(model) {
  let found = rows.get(key(model));
  if (found) return found;
  const row = document.createElement("tr");
  row.dataset.model = model.name;
  row.dataset.version = model.version;
  const cells = {};
  for (const name of COLUMNS) {
    const cell = document.createElement("td");
    cell.className = name;
    row.appendChild(cell);
    cells[name] = cell;
  }
  const button = document.createElement("button");
  button.type = "button";
  button.addEventListener("click", () => control(model.name, button.dataset.action));
  found = { row: row, cells: cells, button: button };
  rows.set(key(model), found);
  return found;
}

async function control(name, action) {
  const message = document.getElementById("message");
  message.className = "";
  text(message, (action === "load" ? "loading " : "unloading ") + name + " …");
  let answer;
  try {
    answer = await fetch("/v2/repository/models/" + encodeURIComponent(name) + "/" + action, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: "{}",
    });
  } catch (error) {
    answer = null;
  }
  if (answer && answer.ok) {
    text(message, (action === "load" ? "loaded " : "unloaded ") + name);
  } else {
    let reason = answer ? "HTTP " + answer.status : "no answer";
    try { reason = (await answer.json()).error || reason; } catch (error) { /* not JSON */ }
    message.className = "error";
    text(message, action + " " + name + " failed: " + reason);
  }
  refresh();
}

function render(reading) {
  const server = reading.server;
  text(document.getElementById("server-version"), server.version);
  text(document.getElementById("uptime"), duration(server.uptime_s));
  text(document.getElementById("workers"), server.workers);
  text(document.getElementById("memory"), bytes(server.resident_bytes));
  text(document.getElementById("control-mode"), server.model_control_mode);
  text(document.getElementById("refreshed"), new Date().toLocaleTimeString());
  const explicit = server.model_control_mode === "explicit";
  const before = new Map();
  if (previous) for (const model of previous.models) before.set(key(model), model);
  const elapsed = previous ? server.uptime_s - previous.server.uptime_s : 0;
  const body = document.querySelector("#models tbody");
  const seen = new Set();
  const firstOfName = new Set();
  let position = 0;
  for (const model of reading.models) {
    const { row, cells: c, button } = rowFor(model);
    seen.add(key(model));
    text(c.name, model.name);
    text(c.version, model.version || "");
    const state = model.state || "UNLOADED";
    text(c.state, state);
    c.state.className = "state " + state;
    if (model.reason) {
      const reason = document.createElement("span");
      reason.className = "reason";
      text(reason, model.reason);
      c.state.appendChild(reason);
    }
    const f = model.figures;
    const old = before.get(key(model));
    const was = old && old.figures;
    c.batches.replaceChildren();
    if (f) {
      const window = was && elapsed > 0;
      const requests = window ? (f.success + f.failure) - (was.success + was.failure) : 0;
      text(c.rps, window ? (requests / elapsed).toFixed(1) : "–");
      const latency = bucketDeltas(f.histograms.request_s, window ? was.histograms.request_s : null);
      text(c.p50, seconds(window ? quantile(0.5, latency) : null));
      text(c.p95, seconds(window ? quantile(0.95, latency) : null));
      text(c.p99, seconds(window ? quantile(0.99, latency) : null));
      const queued = window ? f.queue_count - was.queue_count : 0;
      text(c.queue, seconds(queued > 0 ? (f.queue_ns - was.queue_ns) / queued / 1e9 : null));
      const sizes = batchSizes(f.histograms.batch_size);
      for (const size of sizes) {
        const span = document.createElement("span");
        text(span, size);
        c.batches.appendChild(span);
      }
      if (!sizes.length) text(c.batches, "–");
      const busy = window && f.instances > 0 ? (f.busy_ns - was.busy_ns) / (elapsed * 1e9 * f.instances) : null;
      text(c.busy, busy === null ? "–" : (Math.min(busy, 1) * 100).toFixed(0) + "% of " + f.instances);
      const lookups = f.cache_hits + f.cache_misses;
      text(c.cache, lookups ? ((f.cache_hits / lookups) * 100).toFixed(0) + "%" : "–");
    } else {
      for (const name of ["rps", "p50", "p95", "p99", "queue", "batches", "busy", "cache"]) text(c[name], "–");
    }
    // One button per model name (a load or unload takes every version), in explicit mode only.
    if (explicit && !firstOfName.has(model.name)) {
      const action = model.state === "READY" ? "unload" : "load";
      button.dataset.action = action;
      text(button, action);
      if (button.parentNode !== c.actions) c.actions.appendChild(button);
    } else if (button.parentNode) {
      button.remove();
    }
    firstOfName.add(model.name);
    // In the index's order; a row already in its place is left alone (moving it could lose a click).
    if (body.children[position] !== row) body.insertBefore(row, body.children[position] || null);
    position++;
  }
  for (const [k, { row }] of rows) {
    if (!seen.has(k)) {
      row.remove();
      rows.delete(k);
    }
  }
}

async function refresh() {
  const message = document.getElementById("message");
  try {
    const answer = await fetch("/status", { cache: "no-store" });
    if (!answer.ok) {
      let reason = "HTTP " + answer.status;
      try { reason = (await answer.json()).error || reason; } catch (error) { /* not JSON */ }
      throw new Error(reason);
    }
    const reading = await answer.json();
    render(reading);
    previous = reading;
  } catch (error) {
    message.className = "error";
    text(message, "status unavailable: " + error.message);
  }
}

refresh();
setInterval(refresh, REFRESH_MS);
