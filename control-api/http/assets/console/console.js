// The Confab console: one page, routed by the URL's fragment (#/agents, #/talk/<agent>, #/conversations,
// #/conversations/<id>, #/webhooks, #/keys). Written with htm + Preact (vendor/, bundled into the binary).
// Every request carries the session cookie and the X-Confab-Console header (the server admits the cookie
// only with it); the page never holds an API key.
import { html, render, useState, useEffect, useRef } from "./htm-preact-3.1.1.mjs";

class ApiFailure extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(method, path, body) {
  const headers = { "X-Confab-Console": "1" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, credentials: "same-origin", body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let data = text;
  try { data = JSON.parse(text); } catch (_) { /* not JSON */ }
  if (!response.ok) {
    const said = (data && (data.error || data.message)) || text || `HTTP ${response.status}`;
    throw new ApiFailure(response.status, said);
  }
  return { data, total: Number(response.headers.get("X-Total-Count") || 0) };
}

const PER_PAGE = 20;
/** An ISO 8601 time as "YYYY-MM-DD HH:MM:SS" ("" when absent). */
const when = (iso) => (iso || "").slice(0, 19).replace("T", " ");
/** The records of a list answer: a bare array (with X-Total-Count), or `{data: [...]}`. */
const rowsOf = (page) => (page ? (Array.isArray(page.data) ? page.data : page.data.data || []) : []);
const route = () => (location.hash.replace(/^#\/?/, "") || "agents").split("/");

function useRoute() {
  const [now, setNow] = useState(route());
  useEffect(() => {
    const changed = () => setNow(route());
    addEventListener("hashchange", changed);
    return () => removeEventListener("hashchange", changed);
  }, []);
  return now;
}

/** Runs `load` now and whenever `deps` change; [value, error, reload]. */
function useLoad(load, deps) {
  const [state, setState] = useState({ value: null, error: null });
  const reload = () => load().then((value) => setState({ value, error: null }), (error) => setState({ value: null, error }));
  useEffect(() => { reload(); }, deps);
  return [state.value, state.error, reload];
}

const Failure = ({ error }) => error && html`<p class="error" role="alert">${error.message || String(error)}</p>`;

function Pager({ offset, total, onMove }) {
  if (total <= PER_PAGE) return null;
  return html`<div class="row pager">
    <button disabled=${offset === 0} onClick=${() => onMove(Math.max(0, offset - PER_PAGE))}>Previous</button>
    <span>${offset + 1}–${Math.min(offset + PER_PAGE, total)} of ${total}</span>
    <button disabled=${offset + PER_PAGE >= total} onClick=${() => onMove(offset + PER_PAGE)}>Next</button>
  </div>`;
}

// ---- Agents ----------------------------------------------------------------------------------------

const LLMS = ["local", "openai", "groq", "openrouter", "custom"];
const STTS = ["local", "deepgram", "openai", "custom"];
const TTSS = ["local", "elevenlabs", "cartesia", "openai", "custom"];
const EVENTS = ["agent.interrupted", "agent.started_speaking", "agent.stopped_speaking", "call_ended",
  "max_call_duration_timeout", "max_call_duration_warning", "participant_left", "tool_call", "utterance_committed",
  "user.started_speaking", "user.stopped_speaking"];

function Agents() {
  const [search, setSearch] = useState("");
  const [offset, setOffset] = useState(0);
  const [failure, setFailure] = useState(null);
  const [page, error, reload] = useLoad(
    () => api("GET", `/v1/ext/agent?offset=${offset}&perpage=${PER_PAGE}&search=${encodeURIComponent(search)}`),
    [search, offset],
  );
  const remove = async (agent) => {
    if (!confirm(`Delete the agent “${agent.agent_name}”? Its conversations stay readable.`)) return;
    try { await api("DELETE", `/v1/ext/agent/${agent.id}`); reload(); } catch (err) { setFailure(err); }
  };
  const agents = page ? page.data : [];
  return html`<h1>Agents</h1>
    <div class="row">
      <input type="search" placeholder="Search by name or id" aria-label="Search agents" value=${search}
        onInput=${(e) => { setSearch(e.target.value); setOffset(0); }} />
      <a class="button" href="#/agents/new" id="new-agent">New agent</a>
    </div>
    <${Failure} error=${error || failure} />
    <table id="agents"><thead><tr><th>Name</th><th>Created</th><th></th></tr></thead><tbody>
      ${agents.map((agent) => html`<tr data-id=${agent.id}>
        <td>${agent.agent_name}<br /><small>${agent.id}</small></td>
        <td>${when(agent.created_at)}</td>
        <td class="row"><a class="button" href=${`#/talk/${agent.id}`}>Talk</a>
          <button class="danger" onClick=${() => remove(agent)}>Delete</button></td></tr>`)}
    </tbody></table>
    ${page && agents.length === 0 && html`<p>No agents${search ? " match" : " yet"}.</p>`}
    <${Pager} offset=${offset} total=${page ? page.total : 0} onMove=${setOffset} />`;
}

function NewAgent() {
  const [faces, facesError] = useLoad(() => api("GET", "/v1/ext/avatars"), []);
  const [form, setForm] = useState({ name: "", prompt: "You are a helpful assistant. Answer in one short sentence.",
    avatar: "", llm: "local", stt: "local", tts: "local", record: true, callback: "" });
  const [failure, setFailure] = useState(null);
  const set = (field) => (e) => setForm({ ...form, [field]: e.target.type === "checkbox" ? e.target.checked : e.target.value });
  const avatars = rowsOf(faces);
  const chosen = form.avatar || (avatars[0] && (avatars[0].avatar_key_id || avatars[0].id));
  const submit = async (e) => {
    e.preventDefault();
    const config = { llm: { provider: form.llm }, stt: { provider: form.stt }, tts: { provider: form.tts } };
    const body = { agent_name: form.name, agent_system_prompt: form.prompt, record: form.record,
      avatars: [{ avatar_key_id: chosen, config }] };
    if (form.callback.trim()) Object.assign(body, { callback_url: form.callback.trim(), callback_events: EVENTS });
    try {
      const created = await api("POST", "/v1/ext/agent", body);
      location.hash = `#/talk/${created.data.id}`;
    } catch (err) { setFailure(err); }
  };
  const choice = (label, field, options) => html`<label>${label}
    <select name=${field} value=${form[field]} onChange=${set(field)}>${options.map((o) => html`<option value=${o}>${o}</option>`)}</select></label>`;
  return html`<h1>New agent</h1>
    <form class="stack" id="agent-form" onSubmit=${submit}>
      <label>Name <input name="name" required maxlength="200" value=${form.name} onInput=${set("name")} /></label>
      <label>Prompt <textarea name="prompt" required value=${form.prompt} onInput=${set("prompt")}></textarea></label>
      <div>Face <${Failure} error=${facesError} />
        <div class="faces" role="radiogroup">${avatars.map((face) => {
          const id = face.avatar_key_id || face.id;
          return html`<button type="button" aria-pressed=${id === chosen} title=${face.name || id} data-avatar=${id}
            onClick=${() => setForm({ ...form, avatar: id })}><img alt=${face.name || id} src=${face.display_picture} /></button>`;
        })}</div></div>
      <div class="row">${choice("Language model", "llm", LLMS)}${choice("Speech to text", "stt", STTS)}${choice("Voice", "tts", TTSS)}</div>
      <p><small>Remote providers read their keys from the server's environment (docs/engine.md).</small></p>
      <label>Webhook URL (optional: every event of its calls is sent there, signed)
        <input name="callback" type="url" placeholder="https://example.com/hooks/confab" value=${form.callback} onInput=${set("callback")} /></label>
      <label class="row"><input type="checkbox" name="record" checked=${form.record} onChange=${set("record")} /> Record calls</label>
      <${Failure} error=${failure} />
      <div class="row"><button class="primary" type="submit">Create</button><a class="button" href="#/agents">Cancel</a></div>
    </form>`;
}

// ---- Talk ------------------------------------------------------------------------------------------

function Transcript({ entries }) {
  return html`<ol class="transcript" id="transcript">${entries.map((entry) => html`<li class=${entry.role}>
    <span class="role">${entry.role}</span>${entry.content}</li>`)}</ol>`;
}

function Talk({ agentId }) {
  const [agent, agentError] = useLoad(() => api("GET", `/v1/ext/agent/${agentId}`), [agentId]);
  const [call, setCall] = useState(null);
  const [failure, setFailure] = useState(null);
  const [conversation, setConversation] = useState(null);
  const frame = useRef(null);
  useEffect(() => {
    if (!call) return undefined;
    const poll = setInterval(async () => {
      try { setConversation((await api("GET", `/v1/ext/conversation/${call.id}`)).data); } catch (_) { /* next time */ }
    }, 1000);
    return () => clearInterval(poll);
  }, [call]);
  const start = async () => {
    try {
      const body = { agent_id: agentId, user_name: "Console", user_id: "console" };
      setCall((await api("POST", "/v1/ext/conversation", body)).data);
    } catch (err) { setFailure(err); }
  };
  const hangUp = () => {
    const page = frame.current && frame.current.contentDocument;
    const button = page && page.getElementById("hangup");
    if (button && !button.hidden) button.click();
    setTimeout(() => { location.hash = `#/conversations/${call.id}`; }, 1500);
  };
  if (agentError) return html`<${Failure} error=${agentError} />`;
  return html`<h1>Talk to ${agent ? agent.data.agent_name : "…"}</h1>
    <${Failure} error=${failure} />
    ${!call && html`<p>Your browser will ask for the microphone when you join.</p>
      <button class="primary" id="start-call" onClick=${start}>Start a call</button>`}
    ${call && html`<div class="talk">
      <div><iframe ref=${frame} id="call" title="The call" src=${call.join_link} allow="microphone; autoplay"></iframe>
        <div class="row"><button class="danger" id="console-hangup" onClick=${hangUp}>Hang up</button>
          <span id="call-status">${conversation ? conversation.status : "STARTED"}</span></div></div>
      <div><h2>Transcript</h2><${Transcript} entries=${conversation ? conversation.transcript || [] : []} /></div>
    </div>`}`;
}

// ---- Conversations ---------------------------------------------------------------------------------

function Conversations() {
  const [search, setSearch] = useState("");
  const [offset, setOffset] = useState(0);
  const [page, error] = useLoad(
    () => api("GET", `/v1/ext/conversation?offset=${offset}&perpage=${PER_PAGE}&search=${encodeURIComponent(search)}`),
    [search, offset],
  );
  const rows = rowsOf(page);
  return html`<h1>Conversations</h1>
    <input type="search" placeholder="Search by id, user, agent or status" aria-label="Search conversations"
      value=${search} onInput=${(e) => { setSearch(e.target.value); setOffset(0); }} />
    <${Failure} error=${error} />
    <table id="conversations"><thead><tr><th>When</th><th>Agent</th><th>User</th><th>Status</th></tr></thead><tbody>
      ${rows.map((c) => html`<tr data-id=${c.id}><td><a href=${`#/conversations/${c.id}`}>${when(c.created_at)}</a></td>
        <td>${c.agent_name}</td><td>${c.user_name}</td><td>${c.status}</td></tr>`)}
    </tbody></table>
    <${Pager} offset=${offset} total=${page ? page.total : 0} onMove=${setOffset} />`;
}

const STAGES = ["speech_ended", "committed", "llm_request", "llm_first_token", "first_clause", "tts_first_audio", "first_audio_played"];
const COLOURS = ["#8c959f", "#0969da", "#8250df", "#bf3989", "#d4a72c", "#1a7f37"];
const SEGMENTS = ["waiting for the end of the turn", "to the model's request", "to its first token", "to the first clause",
  "to its first audio", "to the first audio heard"];

/** Each turn's stages on the media clock, from the end of the user's speech to the first audio played. */
function Timeline({ turns }) {
  if (!turns.length) return html`<p>No turn metrics for this conversation.</p>`;
  const spans = turns.map((turn) => {
    const at = turn.media_time || {};
    const start = at.speech_ended ?? at.committed ?? 0;
    const points = STAGES.map((stage) => at[stage]).filter((t) => typeof t === "number");
    return { turn, start, end: Math.max(start, ...points), at };
  });
  const longest = Math.max(0.1, ...spans.map((s) => s.end - s.start));
  const width = 600, row = 26, scale = (width - 140) / longest;
  return html`<svg class="timeline" id="timeline" width=${width} height=${spans.length * row + 24} role="img"
      aria-label="Where each turn's time went">
    ${spans.map((s, i) => {
      let previous = s.start;
      const bars = STAGES.slice(1).map((stage, k) => {
        const t = s.at[stage];
        if (typeof t !== "number" || t < previous) return null;
        const bar = html`<rect x=${60 + (previous - s.start) * scale} y=${i * row + 4} width=${Math.max(1, (t - previous) * scale)}
          height=${row - 8} fill=${COLOURS[k % COLOURS.length]}><title>${STAGES[k]} → ${stage}: ${Math.round((t - previous) * 1000)} ms</title></rect>`;
        previous = t;
        return bar;
      });
      return html`<g><text x="0" y=${i * row + row / 2 + 4}>turn ${s.turn.turn}</text>${bars}
        <text x=${66 + (s.end - s.start) * scale} y=${i * row + row / 2 + 4}>${Math.round((s.end - s.start) * 1000)} ms</text></g>`;
    })}
    <text x="60" y=${spans.length * row + 18}>from the end of speech to the first audio heard (media clock)</text>
  </svg>
  <ul class="legend">${SEGMENTS.map((name, k) => html`<li><span style=${{ background: COLOURS[k] }}></span>${name}</li>`)}</ul>`;
}

function Recording({ id }) {
  const [url, setUrl] = useState(null);
  const [failure, setFailure] = useState(null);
  useEffect(() => {
    let made = null;
    fetch(`/v1/ext/conversation/${id}/recording`, { headers: { "X-Confab-Console": "1" }, credentials: "same-origin" })
      .then(async (response) => {
        if (!response.ok) throw new ApiFailure(response.status, (await response.json()).error);
        made = URL.createObjectURL(await response.blob());
        setUrl(made);
      })
      .catch(setFailure);
    return () => made && URL.revokeObjectURL(made);
  }, [id]);
  if (failure) return html`<p>${failure.message}</p>`;
  return url ? html`<video class="recording" id="recording" controls src=${url}></video>` : html`<p>Loading the recording…</p>`;
}

function Conversation({ id }) {
  const [detail, error, reload] = useLoad(() => api("GET", `/v1/ext/conversation/${id}`), [id]);
  const [metrics, , reloadMetrics] = useLoad(() => api("GET", `/v1/ext/conversation/${id}/turn-metrics`), [id]);
  const ended = detail && detail.data.status === "ENDED";
  const settled = ended && detail.data.is_recorded;
  const readsAfterEnd = useRef(0);
  useEffect(() => {
    // A call still going (or just hung up) is read again until it has ended and its recording is written
    // (a few more reads after the end: an agent that does not record never gets one).
    reloadMetrics();
    if (settled) return undefined;
    const poll = setInterval(() => {
      if (ended && ++readsAfterEnd.current > 5) return;
      reload();
    }, 2000);
    return () => clearInterval(poll);
  }, [ended, settled]);
  if (error) return html`<${Failure} error=${error} />`;
  if (!detail) return html`<p>Loading…</p>`;
  const c = detail.data;
  return html`<h1>Conversation with ${c.agent_name}</h1>
    <p>${c.user_name} · ${c.status} · ${when(c.created_at)} ·
      <a href=${`#/webhooks/${c.id}`}>Webhook deliveries</a></p>
    <div class="conversation">
      <div><h2>Recording</h2>${c.is_recorded ? html`<${Recording} id=${c.id} />` : html`<p>Not recorded.</p>`}</div>
      <div><h2>Where the time went</h2><${Timeline} turns=${metrics ? metrics.data.data || [] : []} />
        <h2>Transcript</h2><${Transcript} entries=${c.transcript || []} /></div>
    </div>`;
}

// ---- Webhooks --------------------------------------------------------------------------------------

function Deliveries({ id }) {
  const [page, error] = useLoad(() => api("GET", `/console/api/conversations/${id}/webhooks`), [id]);
  if (error) return html`<${Failure} error=${error} />`;
  const rows = page ? page.data.data : [];
  return html`<table class="deliveries" id="deliveries"><thead><tr><th>Event</th><th>Stored</th><th>Status</th><th>Attempts</th>
      <th>Next retry</th><th>Last error</th></tr></thead><tbody>
    ${rows.map((d) => html`<tr><td>${d.event}</td><td>${d.created_at.slice(11, 23)}</td><td class=${`status-${d.status}`}>${d.status}</td><td>${d.attempts}</td>
      <td>${d.next_attempt_at ? when(d.next_attempt_at) : "—"}</td><td>${d.last_error}</td></tr>`)}
  </tbody></table>${page && rows.length === 0 && html`<p>No webhook events for this conversation (its agent subscribes to none, or has no callback URL).</p>`}`;
}

function Webhooks({ id }) {
  const [page, error] = useLoad(() => api("GET", `/v1/ext/conversation?offset=0&perpage=${PER_PAGE}`), []);
  const rows = rowsOf(page);
  return html`<h1>Webhooks</h1><${Failure} error=${error} />
    <div class="row">Conversation: <select aria-label="Conversation" value=${id || ""}
      onChange=${(e) => { location.hash = `#/webhooks/${e.target.value}`; }}>
      <option value="">Choose…</option>
      ${rows.map((c) => html`<option value=${c.id}>${when(c.created_at)} · ${c.agent_name} · ${c.user_name}</option>`)}
    </select></div>
    ${id && html`<${Deliveries} id=${id} />`}`;
}

// ---- Keys ------------------------------------------------------------------------------------------

function Keys() {
  const [page, error, reload] = useLoad(() => api("GET", "/console/api/keys"), []);
  const [name, setName] = useState("");
  const [created, setCreated] = useState(null);
  const [failure, setFailure] = useState(null);
  const create = async (e) => {
    e.preventDefault();
    try { setCreated((await api("POST", "/console/api/keys", { name })).data); setName(""); reload(); } catch (err) { setFailure(err); }
  };
  const revoke = async (key) => {
    if (!confirm(`Revoke “${key.name}”? Clients using it are refused from now on.`)) return;
    try { await api("DELETE", `/console/api/keys/${key.id}`); reload(); } catch (err) { setFailure(err); }
  };
  return html`<h1>API keys</h1>
    <form class="row" id="key-form" onSubmit=${create}>
      <input name="name" required maxlength="100" placeholder="Name (who uses it)" value=${name} onInput=${(e) => setName(e.target.value)} />
      <button class="primary" type="submit">Create key</button></form>
    ${created && html`<div class="notice" id="new-key"><p>The key “${created.name}”, shown this once: copy it now.</p>
      <p class="secret">${created.key}</p></div>`}
    <${Failure} error=${error || failure} />
    <table id="keys"><thead><tr><th>Name</th><th>Created</th><th>Revoked</th><th></th></tr></thead><tbody>
      ${(page ? page.data.data : []).map((key) => html`<tr data-id=${key.id}><td>${key.name}</td>
        <td>${when(key.created_at)}</td><td>${key.revoked_at ? when(key.revoked_at) : "—"}</td>
        <td>${!key.revoked_at && html`<button class="danger" onClick=${() => revoke(key)}>Revoke</button>`}</td></tr>`)}
    </tbody></table>`;
}

// ---- Shell -----------------------------------------------------------------------------------------

function SignIn() {
  return html`<main class="signin"><h1>Confab</h1>
    <p>Open the sign-in link that <code>confab serve</code> printed when it started (it works once, for 15
      minutes), or sign in with an API key (<code>confab keys create --name console</code>).</p>
    <form class="stack" method="post" action="/console/login" id="signin">
      <label>API key <input name="key" type="password" autocomplete="off" required /></label>
      <button class="primary" type="submit">Sign in</button></form></main>`;
}

const PAGES = [["agents", "Agents"], ["conversations", "Conversations"], ["webhooks", "Webhooks"], ["keys", "Keys"]];

function Console() {
  const [session, sessionError] = useLoad(() => api("GET", "/console/api/session"), []);
  const [name, id] = useRoute();
  if (sessionError && sessionError.status === 401) return html`<${SignIn} />`;
  if (sessionError) return html`<main><${Failure} error=${sessionError} /></main>`;
  if (!session) return html`<p class="loading">Loading…</p>`;
  const page = {
    agents: () => (id === "new" ? html`<${NewAgent} />` : html`<${Agents} />`),
    talk: () => html`<${Talk} agentId=${id} />`,
    conversations: () => (id ? html`<${Conversation} id=${id} />` : html`<${Conversations} />`),
    webhooks: () => html`<${Webhooks} id=${id} />`,
    keys: () => html`<${Keys} />`,
  }[name] || (() => html`<p>No such page.</p>`);
  return html`<header><strong>Confab</strong><nav>
      ${PAGES.map(([to, label]) => html`<a href=${`#/${to}`} class=${name === to || (name === "talk" && to === "agents") ? "current" : ""}>${label}</a>`)}
    </nav><form method="post" action="/console/logout"><button type="submit">Sign out</button></form></header>
    <main>${page()}</main>`;
}

render(html`<${Console} />`, document.getElementById("app"));
