// hookline inspector: the list, the detail and the actions, on the JSON
// API of docs/INSPECT.md. No build step, no dependency.
"use strict";

const params = new URLSearchParams(location.search);
if (params.get("token")) {
  sessionStorage.setItem("hookline-token", params.get("token"));
  history.replaceState(null, "", location.pathname);
}
const token = sessionStorage.getItem("hookline-token") || "";
// For what cannot send the token as a header: links and the EventSource.
const withToken = (url) => url + (url.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(token);

const $ = (sel) => document.querySelector(sel);
const el = (tag, attrs, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
};

let rows = [];      // the list as shown
let selected = null; // the id shown in the detail
let canReplay = false;

function query() {
  const q = new URLSearchParams();
  if ($("#event").value) q.set("event", $("#event").value);
  if ($("#outcome").value) q.set("outcome", $("#outcome").value);
  if ($("#q").value) q.set("q", $("#q").value);
  return q.toString();
}

async function api(path, opts) {
  opts = opts || {};
  opts.headers = Object.assign({ "X-Hookline-Token": token }, opts.headers || {});
  const resp = await fetch("api/" + path, opts);
  if (!resp.ok) {
    let msg = resp.status + " " + resp.statusText;
    try { msg = (await resp.json()).error || msg; } catch (e) { /* not JSON */ }
    throw new Error(msg);
  }
  return resp;
}

const outcomeText = { "verified": "verified", "unverified": "unverified", "bad-signature": "bad signature", "target-failed": "target failed", "skipped": "skipped", "duplicate": "duplicate" };

function statusClass(status) { return "s" + String(status || 0)[0]; }

// clock is a time as forward's trace prints it: 24-hour, local; with day,
// the date before it.
const pad = (n) => String(n).padStart(2, "0");
function clock(at, day) {
  const t = new Date(at);
  const hms = pad(t.getHours()) + ":" + pad(t.getMinutes()) + ":" + pad(t.getSeconds());
  return day ? t.getFullYear() + "-" + pad(t.getMonth() + 1) + "-" + pad(t.getDate()) + " " + hms : hms;
}

// shortID is a delivery id as the trace prints it: its first 8 characters.
function shortID(d) { return d.delivery_id ? d.delivery_id.slice(0, 8) : "#" + d.id; }

// bodySourceText says in words where the body's bytes came from
// (delivery.BodySource).
const bodySourceText = {
  "bodyB": "the exact bytes sent", "body-exact": "the exact bytes sent", "bodyLink": "the exact bytes sent (fetched from the relay by link)",
  "rawdata": "the exact bytes sent", "capture": "the bytes of a capture file", "edited": "edited here, signed again",
  "body": "JSON as the relay rewrote it (a signature may not match)", "body-text": "text as the relay rewrote it",
};

// targetVerdict is one target's status, time and attempts.
function targetVerdict(t, attempts) {
  if (t.skipped) return el("span", {}, "had it");
  const status = t.error ? "no answer" : String(t.status);
  const cell = el("span", {}, el("span", { class: statusClass(t.status) }, status), " " + t.duration_ms.toFixed(1) + " ms");
  if (attempts.length > 1) cell.append(" (" + attempts.length + " attempts)");
  if (t.github_failed) cell.append(" ", el("span", { class: "gh", title: "GitHub would record this delivery as failed: not 2xx, no answer, or over 10 s" }, "⚠ GitHub: failed"));
  return cell;
}

function targetCell(d) {
  if (d.unrouted) return el("span", { class: "s4" }, "unrouted");
  const cell = el("span", {});
  (d.targets || []).forEach((t, i) => cell.append(i ? " · " : "", t.name ? t.name + " " : "", targetVerdict(t, t.attempts)));
  return cell;
}

// targetAnswer is a target's URL, attempts and answer, for the detail;
// suffix keeps the ids of several targets' blocks apart.
function targetAnswer(t, attempts, heading, suffix) {
  const parts = [el("h3", {}, heading), el("p", {}, t.url)];
  const at = el("table", {}, el("tr", {}, el("th", {}, "attempt"), el("th", {}, "status"), el("th", {}, "first byte"), el("th", {}, "total"), el("th", {}, "error")));
  attempts.forEach((a, i) => at.append(el("tr", {}, el("td", {}, i + 1), el("td", { class: statusClass(a.status) }, a.status || "—"), el("td", {}, a.first_byte_ms.toFixed(1) + " ms"), el("td", {}, a.duration_ms.toFixed(1) + " ms"), el("td", {}, a.error || ""))));
  parts.push(at);
  attempts.slice(0, -1).forEach((a, i) => {
    if (!a.response) return;
    const earlier = el("details", { class: "earlier-answer" }, el("summary", {}, "attempt " + (i + 1) + "'s answer " + a.status));
    earlier.append(headerTable(a.response.headers), bodyBlock(a.response, "earlier-body" + suffix));
    parts.push(earlier);
  });
  const last = attempts[attempts.length - 1];
  if (last && last.response) {
    parts.push(el("h3", {}, "answer " + last.status), headerTable(last.response.headers, "answer-headers" + suffix), bodyBlock(last.response, "answer-body" + suffix),
      el("p", { class: "hint" }, "Answers are kept up to " + (last.response.cap >> 10) + " KiB."));
  } else if (t.error) {
    parts.push(el("p", { class: "s0" }, t.error));
  }
  return parts;
}

// refresh shows the list for the filters as they are: a reply that comes
// after a later request's (the filters changed meanwhile) is dropped.
let refreshes = 0;
// pluginMarks says how the plugins did, in the verdict's cell.
function pluginMarks(d) {
  if (!d.handlers || !d.handlers.length) return [];
  const failed = d.handlers.filter((h) => h.error).length;
  return [el("span", { class: failed ? "s5" : "s2", title: d.handlers.map((h) => h.name + ": " + (h.error || "ok")).join("\n") },
    " plugins " + (failed ? failed + " of " + d.handlers.length + " failed" : "ok"))];
}

async function refresh() {
  const seq = ++refreshes;
  const list = await (await api("deliveries?" + query())).json();
  if (seq !== refreshes) return;
  canReplay = list.replay;
  rows = list.deliveries;
  const c = list.counts;
  $("#counts").replaceChildren(
    el("span", {}, el("b", {}, c.all || 0), " deliveries"),
    ...["verified", "bad-signature", "target-failed", "skipped", "duplicate"].filter((k) => c[k]).map((k) => el("span", { class: k }, el("b", {}, c[k]), " " + outcomeText[k])),
    ...(list.gaps.count ? [el("span", { class: "gap", title: list.gaps.message }, el("b", {}, list.gaps.lost || "?"), " lost by the relay (" + list.gaps.count + (list.gaps.count === 1 ? " gap)" : " gaps)"))] : []),
  );
  const ev = $("#event"), cur = ev.value;
  ev.replaceChildren(el("option", { value: "" }, "all events"), ...list.events.map((e) => el("option", { value: e }, e)));
  ev.value = cur;
  $("#export").href = withToken("api/export?" + query());
  const tbody = $("#list tbody");
  tbody.replaceChildren(...rows.map((d) => {
    const name = d.event + (d.action ? "." + d.action : "");
    const marks = [];
    if (d.edited) marks.push(el("span", { class: "edited" }, " edited"));
    if (d.replay_of) marks.push(el("span", { class: "muted" }, " replay of #" + d.replay_of));
    const from = [d.repository, d.sender ? "@" + d.sender : ""].filter(Boolean).join(" ");
    const tr = el("tr", { "data-id": d.id, onclick: () => show(d.id) },
      el("td", {}, clock(d.at)),
      el("td", { class: "event" }, name, ...marks),
      el("td", {}, el("span", { class: "badge " + d.outcome, title: d.scheme ? "signature scheme: " + d.scheme : "" }, (outcomeText[d.outcome] || d.outcome) + (d.scheme && d.scheme !== "github" ? " · " + d.scheme : "")), ...pluginMarks(d)),
      el("td", {}, targetCell(d)),
      el("td", { class: "id", title: d.delivery_id || "" }, shortID(d)),
      el("td", { title: from }, from),
    );
    if (d.id === selected) tr.classList.add("selected");
    return tr;
  }));
  $("#empty").hidden = rows.length > 0;
}

// json renders a parsed JSON value as collapsible nodes.
function json(v, key) {
  const label = key === undefined ? [] : [el("span", { class: "k" }, JSON.stringify(key)), ": "];
  if (v !== null && typeof v === "object") {
    const arr = Array.isArray(v);
    const entries = arr ? v.map((x, i) => [undefined, x]) : Object.entries(v);
    const d = el("details", { open: "" }, el("summary", {}, ...label, arr ? "[" + v.length + "]" : "{" + entries.length + "}"));
    for (const [k, x] of entries) d.append(json(x, k));
    return d;
  }
  const cls = typeof v === "string" ? "s" : "n";
  return el("div", {}, ...label, el("span", { class: cls }, JSON.stringify(v)));
}

function hex(bytes) {
  const lines = [];
  for (let i = 0; i < bytes.length; i += 16) {
    const chunk = bytes.slice(i, i + 16);
    const h = Array.from(chunk, (b) => b.toString(16).padStart(2, "0")).join(" ");
    const a = Array.from(chunk, (b) => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join("");
    lines.push(i.toString(16).padStart(8, "0") + "  " + h.padEnd(48) + " " + a);
  }
  return lines.join("\n");
}

function bytesOf(view) {
  if (view.body_encoding === "base64") return Uint8Array.from(atob(view.body), (c) => c.charCodeAt(0));
  return new TextEncoder().encode(view.body);
}

function bodyBlock(view, cls) {
  const box = el("div", { class: cls });
  const size = el("p", {}, view.size + " bytes" + (view.body_encoding === "base64" ? ", not UTF-8 (hex)" : ""));
  if (view.truncated) size.append(el("span", { class: "note" }, " — the first " + (view.cap >> 10) + " KiB are kept"));
  box.append(size);
  if (view.body_encoding === "base64") {
    box.append(el("pre", {}, hex(bytesOf(view))));
    return box;
  }
  let parsed;
  try { parsed = JSON.parse(view.body); } catch (e) { parsed = undefined; }
  const raw = el("pre", { class: "raw" }, view.body);
  if (parsed !== undefined && typeof parsed === "object") {
    const tree = el("div", { class: "json" }, json(parsed));
    raw.hidden = true;
    const toggle = el("button", { type: "button", onclick: () => { raw.hidden = !raw.hidden; tree.hidden = !tree.hidden; toggle.textContent = raw.hidden ? "raw" : "tree"; } }, "raw");
    box.append(toggle, tree, raw);
  } else {
    box.append(raw);
  }
  return box;
}

function headerTable(h, cls) {
  const t = el("table", { class: "headers " + (cls || "") });
  for (const k of Object.keys(h || {}).sort()) for (const v of h[k]) t.append(el("tr", {}, el("td", {}, k), el("td", {}, v)));
  return t;
}

async function show(id) {
  selected = id;
  if (location.hash !== "#/deliveries/" + id) history.replaceState(null, "", "#/deliveries/" + id);
  for (const tr of document.querySelectorAll("#list tbody tr")) tr.classList.toggle("selected", Number(tr.dataset.id) === id);
  let d;
  try { d = await (await api("deliveries/" + id)).json(); } catch (e) { $("#detail").replaceChildren(el("p", {}, e.message)); return; }
  const pane = $("#detail");
  pane.hidden = false;
  const name = d.event + (d.action ? "." + d.action : "");
  const title = el("h2", {}, name + " ", el("span", { class: "badge " + d.outcome }, outcomeText[d.outcome]),
    el("a", { class: "permalink", href: "#/deliveries/" + d.id, title: "a link to this delivery, for this inspector" }, "link"));
  if (d.edited) title.append(" ", el("span", { class: "edited" }, "edited"));
  if (d.replay_of) title.append(" replay of #" + d.replay_of);
  const parts = [title, el("p", {}, "delivery " + (d.delivery_id || "(no id)") + " · " + clock(d.at, true) + (d.repository ? " · " + d.repository : "") + (d.sender ? " · @" + d.sender : ""))];
  if (d.verify_note) parts.push(el("p", { class: "note" }, d.verify_note));
  if ((d.targets || []).some((t) => t.github_failed)) parts.push(el("p", { class: "gh" }, "GitHub would record this delivery as failed (not 2xx, no answer, or over 10 s)."));

  const actions = el("div", { class: "actions" });
  if (canReplay) {
    actions.append(el("button", { type: "button", id: "replay", onclick: () => replay(d.id) }, "replay (r)"));
    actions.append(el("button", { type: "button", id: "edit", onclick: () => editForm(d) }, "edit and replay"));
  }
  actions.append(el("button", { type: "button", id: "curl", onclick: () => copyCurl(d.id) }, "copy as curl"));
  actions.append(el("a", { href: withToken("api/deliveries/" + d.id + "/capture"), download: "" }, "download capture"));
  parts.push(actions, el("div", { id: "action-out" }));

  for (const t of d.targets || []) {
    if (!t.skipped) parts.push(...targetAnswer(t, t.attempts, t.name ? "target " + t.name : "target answer", t.name ? "-" + t.name : ""));
  }
  if (d.unrouted) parts.push(el("p", { class: "note" }, "No route took this delivery, and there is no --target: it was sent nowhere."));
  if (d.handlers && d.handlers.length) {
    parts.push(el("h3", {}, "plugins"));
    for (const h of d.handlers) {
      parts.push(el("p", { class: h.error ? "s5" : "s2" }, h.name + ": " + (h.error || "ok") + " (" + h.duration_ms.toFixed(1) + " ms)"));
      if (h.output) parts.push(el("pre", { class: "plugin-output" }, h.output));
    }
  }
  parts.push(el("h3", {}, "request"), el("p", {}, d.request.method + (d.request.query ? " ?" + d.request.query : "") + (d.request.body_source ? " · the body: " + (bodySourceText[d.request.body_source] || d.request.body_source) : "")));
  parts.push(headerTable(d.request.headers, "request-headers"), bodyBlock(d.request, "request-body"));
  pane.replaceChildren(...parts);
}

function say(msg, cls) { $("#action-out").replaceChildren(el("p", { class: cls || "" }, msg)); }

async function replay(id, edit) {
  try {
    const opts = { method: "POST" };
    if (edit) { opts.body = JSON.stringify(edit); opts.headers = { "Content-Type": "application/json" }; }
    const r = await (await api("deliveries/" + id + "/replay", opts)).json();
    await refresh();
    await show(r.id);
  } catch (e) {
    say("replay failed: " + e.message, "s5");
  }
}

function editForm(d) {
  const body = el("textarea", { id: "edit-body" });
  let text = d.request.body_encoding === "base64" ? "" : d.request.body;
  try { text = JSON.stringify(JSON.parse(text), null, 2); } catch (e) { /* keep as it is */ }
  body.value = text;
  const original = text;
  const headers = el("textarea", { id: "edit-headers", placeholder: '{"X-Name": ["value"]}  (an empty list removes one)' });
  const resign = el("input", { type: "checkbox", id: "edit-resign", checked: "" });
  const send = el("button", { type: "button", id: "edit-send", onclick: () => {
    let h = {};
    if (headers.value.trim()) {
      try { h = JSON.parse(headers.value); } catch (e) { say("the headers are not JSON: " + e.message, "s5"); return; }
    }
    if (body.value === original && !Object.keys(h).length) {
      note.textContent = "Nothing is edited: change the body or a header first (replay sends it as it is).";
      return;
    }
    replay(d.id, { body: body.value, headers: h, resign: resign.checked });
  } }, "send edited");
  const note = el("p", { id: "edit-note", class: "note" });
  $("#action-out").replaceChildren(
    el("p", {}, "Edit the body and headers; the delivery is signed again with this run's secret, so a handler that verifies accepts it, and is marked as edited."),
    body, headers, el("label", {}, resign, " sign again with the run's secret"), " ", send, note,
  );
  body.focus();
}

async function copyCurl(id) {
  try {
    const text = await (await api("deliveries/" + id + "/curl")).text();
    try { await navigator.clipboard.writeText(text); say("copied; the command:"); } catch (e) { say("the command (copy it):"); }
    $("#action-out").append(el("pre", { id: "curl-text" }, text));
  } catch (e) {
    say(e.message, "s5");
  }
}

$("#clear").addEventListener("click", async () => {
  await api("deliveries", { method: "DELETE" });
  selected = null;
  history.replaceState(null, "", location.pathname);
  $("#detail").replaceChildren(el("p", { class: "hint" }, "Choose a delivery (or press j) to see its request, the target's answer, and replay it."));
  refresh();
});
for (const id of ["#event", "#outcome"]) $(id).addEventListener("change", refresh);
$("#q").addEventListener("input", refresh);
$("#filters").addEventListener("submit", (e) => e.preventDefault());

document.addEventListener("keydown", (e) => {
  if (e.target.matches("input, textarea, select")) {
    if (e.key === "Escape") e.target.blur();
    return;
  }
  const i = rows.findIndex((d) => d.id === selected);
  if (e.key === "j" && rows.length) show(rows[Math.min(i + 1, rows.length - 1)].id);
  else if (e.key === "k" && rows.length) show(rows[Math.max(i - 1, 0)].id);
  else if (e.key === "r" && selected !== null && canReplay) replay(selected);
  else if (e.key === "/") { e.preventDefault(); $("#q").focus(); }
  else return;
  e.preventDefault();
});

// Live: every new delivery refreshes the list (filters applied), and so
// does every (re)connection, for what came while there was none.
function listen() {
  const es = new EventSource(withToken("api/events"));
  es.onopen = () => refresh();
  es.addEventListener("delivery", () => refresh());
  es.addEventListener("gap", () => refresh());
  es.onerror = () => { es.close(); setTimeout(listen, 1000); };
}
listen();

// A link to one delivery (#/deliveries/ID) opens it.
function fromHash() {
  const m = /^#\/deliveries\/(\d+)$/.exec(location.hash);
  if (m && Number(m[1]) !== selected) show(Number(m[1]));
}
window.addEventListener("hashchange", fromHash);
fromHash();
