// The channel page of the hookline relay: a live list of the channel's
// deliveries. It subscribes with hookline's messages (?hookline=1), which
// hold the exact body bytes: a JSON body as it is in "body" (with "bodyB":
// null; read from the message's text, not from what JSON.parse makes of
// it), any other in bodyB (base64), and a body of 1 MiB or more as
// bodyLink, fetched when its delivery is opened. It replays the relay's
// history on load (?lastEventId=0). Payloads are untrusted: they are only
// ever set as text, never as HTML. On a private channel the page's URL
// carries the read token (?token=), which the stream's URL repeats
// (EventSource sends no header) and the body and redelivery requests send
// as Authorization.
'use strict';

(() => {
  const MAX_ITEMS = 500;
  const $ = (id) => document.getElementById(id);
  const path = location.pathname.replace(/\/+$/, '');
  const token = new URLSearchParams(location.search).get('token');
  const auth = token ? { Authorization: `Bearer ${token}` } : {};
  const channelURL = location.origin + path + (token ? `?token=${encodeURIComponent(token)}` : '');
  const list = $('deliveries');
  const shown = new Set();
  let lastId = 0;

  // The channel URL, its copy button and the commands that use it; a short
  // name (relay.GuessableNameLength) is a warning: it is the only key.
  $('channel-url').value = channelURL;
  $('guessable').hidden = token || path.slice(path.lastIndexOf('/') + 1).length >= 16;
  $('commands').textContent =
    `hookline forward --url ${channelURL} --target http://127.0.0.1:3000/api/github/webhooks\n` +
    `smee --url ${channelURL} --target http://127.0.0.1:3000/api/github/webhooks`;
  $('copy').addEventListener('click', async () => {
    const button = $('copy');
    try {
      await navigator.clipboard.writeText(channelURL);
    } catch {
      $('channel-url').select();
      document.execCommand('copy');
    }
    button.textContent = 'Copied';
    setTimeout(() => { button.textContent = 'Copy'; }, 1500);
  });

  function setStatus(state) {
    const el = $('status');
    el.dataset.state = state;
    el.textContent = state;
  }

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    Object.assign(node, props || {});
    for (const c of children) node.append(c);
    return node;
  }

  function formatSize(n) {
    if (n < 1024) return `${n} B`;
    if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
    return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  }

  function decodeBase64(s) {
    const bin = atob(s || '');
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return bytes;
  }

  // rawMember returns the JSON text of the member key of the object text
  // (a message as the relay wrote it), or undefined.
  function rawMember(text, key) {
    let i = text.indexOf('{') + 1;
    const space = () => { while (i < text.length && ' \t\r\n'.includes(text[i])) i++; };
    const string = () => {
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === '\\') i++;
      i++;
    };
    const value = () => {
      if (text[i] === '"') return string();
      if (text[i] !== '{' && text[i] !== '[') {
        while (i < text.length && !',}] \t\r\n'.includes(text[i])) i++;
        return;
      }
      let depth = 0;
      do {
        if (text[i] === '"') { string(); continue; }
        if (text[i] === '{' || text[i] === '[') depth++;
        else if (text[i] === '}' || text[i] === ']') depth--;
        i++;
      } while (depth > 0 && i < text.length);
    };
    for (;;) {
      space();
      if (text[i] !== '"') return undefined;
      const start = i;
      string();
      const name = JSON.parse(text.slice(start, i));
      space();
      i++; // the colon
      space();
      const from = i;
      value();
      if (name === key) return text.slice(from, i);
      space();
      if (text[i++] !== ',') return undefined;
    }
  }

  // messageOf reads a delivery's message: its fields, and bytes, the exact
  // body (undefined for a body sent by link).
  function messageOf(data) {
    const msg = JSON.parse(data);
    if (msg.bodyB === null && 'body' in msg) {
      msg.bytes = new TextEncoder().encode(rawMember(data, 'body'));
    } else if (typeof msg.bodyLink !== 'string') {
      msg.bytes = decodeBase64(msg.bodyB);
    }
    return msg;
  }

  function tryJSON(text) {
    if (!/^\s*[[{]/.test(text)) return undefined;
    try { return JSON.parse(text); } catch { return undefined; }
  }

  // The payload as an object, when the body is JSON or a form whose
  // "payload" field is (GitHub's form content type); undefined otherwise.
  function payloadOf(bytes, contentType) {
    let text;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      return undefined;
    }
    const type = (contentType || '').split(';')[0].trim().toLowerCase();
    if (type === 'application/x-www-form-urlencoded') {
      return tryJSON(new URLSearchParams(text).get('payload') || '');
    }
    return tryJSON(text);
  }

  // What a delivery is: event (and action), delivery id, from its headers
  // and payload, the way GitHub and its kin label them.
  function describe(headers, payload) {
    const event = headers['x-github-event'] || headers['x-gitea-event'] || headers['x-gogs-event'] ||
      headers['x-gitlab-event'] || headers['x-event-key'] || '';
    const action = payload && typeof payload.action === 'string' ? payload.action : '';
    const guid = headers['x-github-delivery'] || headers['x-gitea-delivery'] || headers['x-request-id'] || '';
    return { event, action, guid };
  }

  function hexdump(bytes) {
    const lines = [];
    const n = Math.min(bytes.length, 64 * 1024);
    for (let off = 0; off < n; off += 16) {
      const row = bytes.subarray(off, Math.min(off + 16, n));
      const hex = Array.from(row, (b) => b.toString(16).padStart(2, '0')).join(' ');
      const ascii = Array.from(row, (b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : '.')).join('');
      lines.push(`${off.toString(16).padStart(8, '0')}  ${hex.padEnd(47)}  ${ascii}`);
    }
    if (bytes.length > n) lines.push(`… ${bytes.length - n} more bytes`);
    return lines.join('\n');
  }

  // The payload as a person wants to read it: JSON pretty-printed, a form's
  // fields one per line (a JSON field pretty-printed), other text as it is,
  // binary as a hex dump.
  function renderPayload(bytes, contentType) {
    let text;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      return { kind: `binary, ${bytes.length} bytes`, text: hexdump(bytes) };
    }
    const type = (contentType || '').split(';')[0].trim().toLowerCase();
    if (type === 'application/x-www-form-urlencoded') {
      const out = [];
      for (const [k, v] of new URLSearchParams(text)) {
        const json = tryJSON(v);
        out.push(`${k} = ${json === undefined ? v : JSON.stringify(json, null, 2)}`);
      }
      return { kind: 'form', text: out.join('\n') };
    }
    const json = tryJSON(text);
    if (json !== undefined) return { kind: 'JSON', text: JSON.stringify(json, null, 2) };
    return { kind: 'text', text };
  }

  // The body's bytes: bodyB, or, for a large body, what its bodyLink
  // answers (the relay keeps it for this page until a later one is fetched).
  async function bodyBytes(msg) {
    if (typeof msg.bodyLink !== 'string') return msg.bytes;
    const res = await fetch(new URL(msg.bodyLink, location.origin + path), { headers: auth });
    if (!res.ok) throw new Error(`the relay answered ${res.status} for the body (it keeps a large body only until a later one is opened; Redeliver sends it again)`);
    return new Uint8Array(await res.arrayBuffer());
  }

  async function renderDetail(id, msg, detail) {
    const { query, timestamp, body, bodyB, bodyLink, bytes: _, ...headers } = msg;
    const result = el('span', { className: 'result' });
    const redeliver = el('button', { type: 'button', className: 'redeliver', textContent: 'Redeliver' });
    redeliver.addEventListener('click', async () => {
      redeliver.disabled = true;
      result.className = 'result';
      result.textContent = 'sending…';
      try {
        const res = await fetch(`${path}/redeliver/${id}`, { method: 'POST', headers: auth });
        const data = await res.json();
        if (!res.ok) throw new Error(data.error || res.statusText);
        result.textContent = `sent again as #${data.id}`;
      } catch (err) {
        result.className = 'result bad';
        result.textContent = `redelivery failed: ${err.message}`;
      } finally {
        redeliver.disabled = false;
      }
    });
    let bytes;
    try {
      bytes = await bodyBytes(msg);
    } catch (err) {
      detail.append(el('div', { className: 'actions' }, redeliver, result),
        el('p', { className: 'result bad', textContent: err.message }));
      return;
    }
    const payload = renderPayload(bytes, headers['content-type']);
    const copy = el('button', { type: 'button', textContent: 'Copy payload' });
    copy.addEventListener('click', () => navigator.clipboard.writeText(payload.text).catch(() => {}));

    const table = el('table', { className: 'headers' });
    for (const name of Object.keys(headers).sort()) {
      table.append(el('tr', {}, el('td', { textContent: name }), el('td', { textContent: String(headers[name]) })));
    }
    detail.append(
      el('div', { className: 'actions' }, redeliver, copy, result),
      el('h3', { textContent: 'Headers' }), table,
      el('h3', { textContent: `Payload (${payload.kind}, ${bytes.length} bytes)` }),
      el('pre', { className: 'payload', textContent: payload.text }),
    );
    if (query && Object.keys(query).length > 0) {
      detail.append(el('h3', { textContent: 'Query' }), el('pre', { textContent: JSON.stringify(query, null, 2) }));
    }
  }

  function addDelivery(id, msg) {
    if (!Number.isFinite(id) || shown.has(id)) return;
    shown.add(id);
    const { query, timestamp, body, bodyB, bodyLink, bytes, ...headers } = msg;
    const linked = typeof bodyLink === 'string';
    const payload = linked ? undefined : payloadOf(bytes, headers['content-type']);
    const { event, action, guid } = describe(headers, payload);
    const when = new Date(timestamp);
    const time = el('time', { dateTime: when.toISOString(), textContent: when.toLocaleTimeString(), title: when.toString() });
    const summary = el('summary', {},
      el('span', { className: 'id', textContent: `#${id}` }),
      el('span', { className: 'event', textContent: event ? (action ? `${event}.${action}` : event) : '(no event header)' }),
      el('span', { className: 'guid mono', textContent: guid, title: guid }),
      time,
      el('span', { className: 'size', textContent: linked ? '≥ 1 MiB' : formatSize(bytes.length) }));
    const detail = el('div', { className: 'detail' });
    const details = el('details', {}, summary, detail);
    details.addEventListener('toggle', () => {
      if (details.open && !detail.hasChildNodes()) renderDetail(id, msg, detail);
    });
    const item = el('li', { className: 'delivery' }, details);
    item.dataset.id = String(id);
    list.prepend(item);
    while (list.children.length > MAX_ITEMS) list.lastElementChild.remove();
    $('count').textContent = String(shown.size);
    $('empty').hidden = true;
  }

  function addGap(gap) {
    const text = gap.reason === 'expired'
      ? `Deliveries #${gap.from}–#${gap.to} expired from the relay's history before this page connected.`
      : 'The relay did not recognise the last delivery this page saw (it may have restarted); deliveries may be missing.';
    list.prepend(el('li', { className: 'gap', textContent: text }));
  }

  // connect subscribes; the browser reconnects by itself after a dropped
  // stream (sending Last-Event-ID), and this reconnects after a refusal.
  function connect() {
    setStatus('connecting');
    const source = new EventSource(`${path}?hookline=1&lastEventId=${lastId}${token ? `&token=${encodeURIComponent(token)}` : ''}`);
    source.addEventListener('ready', () => setStatus('connected'));
    source.addEventListener('ping', () => setStatus('connected'));
    source.addEventListener('hookline-gap', (e) => addGap(JSON.parse(e.data)));
    source.addEventListener('message', (e) => {
      const id = Number(e.lastEventId);
      lastId = Math.max(lastId, id);
      addDelivery(id, messageOf(e.data));
    });
    source.addEventListener('error', () => {
      if (source.readyState === EventSource.CLOSED) {
        setStatus('closed');
        setTimeout(connect, 5000);
      } else {
        setStatus('reconnecting');
      }
    });
  }
  connect();
})();
