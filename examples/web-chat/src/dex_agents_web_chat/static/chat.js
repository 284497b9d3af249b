// The chat page: the session snapshot, then its AgentEvents as Server-Sent Events.
//
// Rules (dex_agents.ui_stream):
// - Load the snapshot, render it, and open the event stream from its resume_token. The browser
//   reconnects by itself with Last-Event-ID; a 400 (or any refusal) closes the EventSource, and
//   the page then loads the snapshot again and opens a new stream.
// - Live text is grouped by (turn_id, step_execution_id, attempt): within one Step execution only
//   the highest attempt seen is kept, so a model call retried after a crash shows only its new
//   text. Different Step executions of a turn each keep their text.
// - After turn_completed, turn_failed, turn_steered or turn_cancelled, the turn's live text is
//   replaced by the stored messages of a fresh snapshot.
// - Prompts (approvals, questions) come from the snapshot's pending_interrupts.
// - The page follows the newest content (messages, live text, prompts) while the reader is at
//   the bottom; once they scroll up it stays put and shows a "new messages" button instead.
// - A call whose attempt was lost and whose outcome check answered (tool_call_finished's, the
//   record's and the stored tool result's outcome_check) shows the answer on its card: "confirmed
//   after a restart" apart from "outcome unknown after a restart". The record is gone once the
//   turn ends; the stored result keeps the answer, so the card keeps it after a reload.
// - A stopped turn keeps its note ("[Dex] The user stopped ...") and, until the page reloads,
//   the partial text it streamed, marked as not sent.
// - A Step writes its events before it commits, so a snapshot read right after an event can
//   still show the state before it. Each event says what the snapshot must show once its Step
//   committed (the turn ended, the interrupt pending, ...); the page reads the snapshot again,
//   a little later, until it does.
// - An empty resume_token also comes from a Dex Server whose Stream Store is disabled
//   (streamStore.backend: disabled): its event stream yields only keep-alive comments. So while a
//   stream opened from an empty token has delivered no event, the page polls the snapshot; the
//   first event stops the polling.
"use strict";

const FINISHED = new Set(["turn_completed", "turn_failed", "turn_steered", "turn_cancelled"]);
const REFRESHING = new Set([
  "turn_started", "interrupt_raised", "interrupt_resolved", "tool_call_finished",
  "timer_started", "plan_updated", "tool_task_started",
]);
const NOTE_PREFIX = "[Dex]";
const STOPPED_NOTE_PREFIX = "[Dex] The user stopped the previous turn";
const FOLLOW_SLACK_PX = 48;
const STATUS_LABELS = {
  waiting_for_user_message: "waiting for your message",
  running_model: "thinking",
  running_tools: "running tools",
  compacting_context: "compacting the conversation",
};
const FINAL_TOOL_STATUSES = new Set(["rejected", "succeeded", "failed", "outcome_unknown"]);
const OUTCOME_CHECK_LABELS = {
  applied: "confirmed after a restart",
  not_applied: "did not take effect before a restart",
  unknown: "outcome unknown after a restart",
  check_failed: "outcome unknown after a restart: the check failed",
};
const EXPECTATION_LIFETIME_MS = 30000;
const EXPECTATION_RETRY_MS = 150;
const SNAPSHOT_POLL_MS = 1000;

const state = {
  sessionId: null,
  snapshot: null,
  live: new Map(), // turn_id -> {number, items: [{kind, key}], segments: Map, tools: Map}
  source: null,
  streamBroken: false,
  reloadDelayMs: 500,
  refreshing: null,
  refreshAgain: false,
  renderQueued: false,
  expectations: [], // [{holds(snapshot) -> bool, until}], what events say the snapshot will show
  resolvedInterrupts: new Set(),
  outcomeChecks: new Map(), // tool_call_id -> outcome_check, as events and records said
  expectationTimer: null,
  pollTimer: null,
  following: true, // the reader is at the bottom: new content scrolls into view
  stopped: new Map(), // turn_id -> partial texts of a turn that Stop ended, never stored
  stopping: null, // the turn a Stop press asked to cancel: Stop stays disabled until it ends
  renderedHtml: "",
};

const $ = (id) => document.getElementById(id);

function turnNumber(turnId) {
  const match = /^turn-(\d+)$/.exec(turnId || "");
  return match ? Number(match[1]) : 0;
}

function isFinished(turnId) {
  return isFinishedIn(state.snapshot, turnId);
}

function isFinishedIn(snapshot, turnId) {
  const current = snapshot && snapshot.state;
  if (!current || !turnId) return false;
  return current.active_turn_id !== turnId && turnNumber(turnId) <= current.turn_count;
}

function activeTurnId() {
  const current = state.snapshot && state.snapshot.state;
  if (current && current.active_turn_id) return current.active_turn_id;
  const unfinished = [...state.live.keys()].filter((turnId) => !isFinished(turnId));
  unfinished.sort((a, b) => turnNumber(b) - turnNumber(a));
  return unfinished[0] || null;
}

// --- requests -----------------------------------------------------------------------------

async function api(path, body) {
  const init = body === undefined
    ? { headers: { Accept: "application/json" } }
    : { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) };
  const response = await fetch(path, { credentials: "same-origin", ...init });
  if (!response.ok) {
    throw new Error(`${path}: ${response.status} ${await response.text()}`);
  }
  return response.json();
}

function sessionPath(suffix) {
  return `/sessions/${encodeURIComponent(state.sessionId)}${suffix}`;
}

// ``ids`` (call and interrupt IDs) sit behind a details toggle: a reader rarely needs them.
function logAction(action, text, accepted, ids) {
  const item = document.createElement("li");
  item.dataset.action = action;
  item.dataset.accepted = String(accepted);
  item.append(element("span", "action-text", text));
  if (ids) item.append(idDetails(ids));
  const log = $("actions");
  log.append(item);
  log.scrollTop = log.scrollHeight;
}

function idDetails(ids) {
  const details = element("details", "ids");
  details.append(element("summary", "", "details"), element("code", "", ids));
  return details;
}

// --- following the conversation -----------------------------------------------------------

// Only the reader scrolling up stops the following. A scroll event arrives after the frame, so
// the one our own scrollToNewest caused can find the page grown again meanwhile (a burst of
// updates): not at the bottom, but not scrolled up either. For the same reason a content change
// reads the position itself before it changes the page: the reader's scroll may not have sent
// its event yet, and following on the last event's word would pull the page back down under
// them. (Read after the change, the position could be one the browser's scroll anchoring moved.)
let lastScrollTop = 0;

function atBottom() {
  const page = document.scrollingElement;
  return page.scrollHeight - page.scrollTop - page.clientHeight <= FOLLOW_SLACK_PX;
}

function scrollToNewest() {
  const page = document.scrollingElement;
  page.scrollTop = page.scrollHeight;
  lastScrollTop = page.scrollTop;
  state.following = true;
  $("new-messages").hidden = true;
}

// Before the transcript or the prompts change: the page's height to compare with afterwards.
function beginContentChange() {
  noteScrollPosition();
  return document.scrollingElement.scrollHeight;
}

// After the transcript or the prompts changed: follow, or offer the way down.
function afterContentChange(grew) {
  if (state.following) {
    scrollToNewest();
  } else if (grew) {
    $("new-messages").hidden = false;
  }
}

function noteScrollPosition() {
  const top = document.scrollingElement.scrollTop;
  const scrolledUp = top < lastScrollTop;
  lastScrollTop = top;
  if (atBottom()) {
    state.following = true;
    $("new-messages").hidden = true;
  } else if (scrolledUp) {
    state.following = false;
  }
}

window.addEventListener("scroll", noteScrollPosition, { passive: true });

// --- snapshot and stream ------------------------------------------------------------------

async function boot() {
  const params = new URLSearchParams(location.search);
  state.sessionId = params.get("session");
  if (!state.sessionId) {
    const started = await api("/sessions", {});
    state.sessionId = started.session_id;
    params.set("session", state.sessionId);
    history.replaceState(null, "", `/?${params}`);
  }
  $("session-id").textContent = state.sessionId;
  await loadAndStream();
}

async function loadAndStream() {
  closeStream();
  setConnection("loading");
  try {
    const { snapshot, resume_token: resumeToken } = await api(sessionPath("/snapshot"));
    setSnapshot(snapshot);
    openStream(resumeToken);
    state.reloadDelayMs = 500;
  } catch (error) {
    console.warn("loading the snapshot failed", error);
    scheduleReload();
  }
}

function scheduleReload() {
  setConnection("reloading");
  const delay = state.reloadDelayMs;
  state.reloadDelayMs = Math.min(delay * 2, 8000);
  setTimeout(loadAndStream, delay);
}

function openStream(resumeToken) {
  const source = new EventSource(sessionPath(`/events?resume_token=${encodeURIComponent(resumeToken)}`));
  state.source = source;
  if (!resumeToken) startPolling();
  source.onopen = () => {
    if (source !== state.source) return;
    setConnection("live");
    if (state.streamBroken) {
      // Back after a gap: the stream resumed at Last-Event-ID; the snapshot catches up on
      // anything the Stream no longer held.
      state.streamBroken = false;
      document.body.dataset.reconnects = String(Number(document.body.dataset.reconnects || 0) + 1);
      refreshSnapshot();
    }
  };
  source.onmessage = (message) => {
    if (source !== state.source) return;
    stopPolling();
    applyEvent(JSON.parse(message.data));
  };
  source.onerror = () => {
    if (source !== state.source) return;
    state.streamBroken = true;
    if (source.readyState === EventSource.CLOSED) {
      state.source = null;
      scheduleReload();
    } else {
      setConnection("reconnecting");
    }
  };
}

function closeStream() {
  stopPolling();
  if (state.source) state.source.close();
  state.source = null;
}

// Without events (the Stream Store is disabled, or none was written yet), the snapshot is the
// only news; a refresh made meanwhile for another reason coalesces with the poll.
function startPolling() {
  stopPolling();
  document.body.dataset.polling = "true";
  state.pollTimer = setInterval(refreshSnapshot, SNAPSHOT_POLL_MS);
}

function stopPolling() {
  if (state.pollTimer) clearInterval(state.pollTimer);
  state.pollTimer = null;
  delete document.body.dataset.polling;
}

function setConnection(value) {
  document.body.dataset.connection = value;
  $("connection").textContent = value;
}

// A fresh snapshot without reopening the stream; calls made meanwhile coalesce into one more.
async function refreshSnapshot() {
  if (state.refreshing) {
    state.refreshAgain = true;
    return state.refreshing;
  }
  state.refreshing = (async () => {
    try {
      do {
        state.refreshAgain = false;
        const { snapshot } = await api(sessionPath("/snapshot"));
        setSnapshot(snapshot);
      } while (state.refreshAgain);
    } catch (error) {
      console.warn("refreshing the snapshot failed", error);
    } finally {
      state.refreshing = null;
    }
  })();
  return state.refreshing;
}

function setSnapshot(snapshot) {
  state.snapshot = snapshot;
  for (const checked of [...(snapshot.tool_calls || []), ...(snapshot.messages || [])]) {
    if (checked.tool_call_id && checked.outcome_check && checked.outcome_check !== "pending") {
      state.outcomeChecks.set(checked.tool_call_id, checked.outcome_check);
    }
  }
  for (const turnId of [...state.live.keys()]) {
    if (isFinished(turnId)) state.live.delete(turnId);
  }
  const now = Date.now();
  state.expectations = state.expectations.filter(
    (expectation) => expectation.until > now && !expectation.holds(snapshot));
  if (state.expectations.length && !state.expectationTimer) {
    state.expectationTimer = setTimeout(() => {
      state.expectationTimer = null;
      refreshSnapshot();
    }, EXPECTATION_RETRY_MS);
  }
  const before = beginContentChange();
  renderPrompts();
  afterContentChange(document.scrollingElement.scrollHeight > before);
  queueRender();
}

// What the snapshot shows once the Step that wrote ``event`` committed.
function expectationOf(event, payload) {
  const turnId = event.turn_id;
  const pending = (snapshot) => (snapshot.pending_interrupts || [])
    .some((interrupt) => interrupt.interrupt_id === payload.interrupt_id);
  if (FINISHED.has(event.type)) return (snapshot) => isFinishedIn(snapshot, turnId);
  switch (event.type) {
    case "turn_started":
      return (snapshot) => Boolean(snapshot.state) && snapshot.state.turn_count >= turnNumber(turnId);
    case "interrupt_raised":
      return (snapshot) => pending(snapshot) || isFinishedIn(snapshot, turnId)
        || state.resolvedInterrupts.has(payload.interrupt_id);
    case "interrupt_resolved":
      return (snapshot) => !pending(snapshot);
    case "tool_call_finished":
      return (snapshot) => !(snapshot.tool_calls || []).some((call) =>
        call.tool_call_id === payload.tool_call_id && !FINAL_TOOL_STATUSES.has(call.status));
    default:
      return null;
  }
}

// --- events -------------------------------------------------------------------------------

function liveTurn(turnId) {
  let turn = state.live.get(turnId);
  if (!turn) {
    turn = { number: turnNumber(turnId), items: [], segments: new Map(), tools: new Map() };
    state.live.set(turnId, turn);
  }
  return turn;
}

function applyEvent(event) {
  const payload = JSON.parse(event.payload || "{}");
  const turnId = event.turn_id;
  if (event.type === "interrupt_resolved") state.resolvedInterrupts.add(payload.interrupt_id);
  if (event.type === "tool_call_finished" && payload.outcome_check) {
    state.outcomeChecks.set(payload.tool_call_id, payload.outcome_check);
  }
  const holds = expectationOf(event, payload);
  if (holds) state.expectations.push({ holds, until: Date.now() + EXPECTATION_LIFETIME_MS });
  if (FINISHED.has(event.type) || REFRESHING.has(event.type)) refreshSnapshot();
  if (event.type === "turn_cancelled") keepStoppedText(turnId);
  // A turn the snapshot already shows finished is rendered from its stored messages.
  if (!turnId || isFinished(turnId) || FINISHED.has(event.type)) {
    queueRender();
    return;
  }
  const turn = liveTurn(turnId);
  switch (event.type) {
    case "text_delta":
    case "reasoning_delta":
      appendText(turn, event, payload.text || "");
      break;
    case "tool_call_deferred":
      tool(turn, payload).status = payload.requires_approval ? "awaiting_approval" : "pending";
      break;
    case "tool_call_started":
      tool(turn, payload).status = "running";
      break;
    case "tool_call_finished":
      tool(turn, payload).status = payload.status;
      break;
    default:
      break;
  }
  queueRender();
}

// The text a stopped turn streamed was never stored: keep it on this page, marked as such.
function keepStoppedText(turnId) {
  const turn = state.live.get(turnId);
  if (!turn) return;
  const texts = [...turn.segments.values()]
    .filter((segment) => segment.kind === "text_delta" && segment.text)
    .map((segment) => segment.text);
  if (texts.length) state.stopped.set(turnId, texts);
}

function appendText(turn, event, text) {
  const key = `${event.type}/${event.step_execution_id}`;
  let segment = turn.segments.get(key);
  if (!segment) {
    segment = { kind: event.type, stepExecutionId: event.step_execution_id, attempt: event.attempt, text: "" };
    turn.segments.set(key, segment);
    turn.items.push({ kind: "segment", key });
  }
  if (event.attempt < segment.attempt) return; // partial text of an attempt a retry replaced
  if (event.attempt > segment.attempt) {
    segment.attempt = event.attempt;
    segment.text = "";
  }
  segment.text += text;
}

function tool(turn, payload) {
  let record = turn.tools.get(payload.tool_call_id);
  if (!record) {
    record = { toolCallId: payload.tool_call_id, toolName: payload.tool_name, status: "pending" };
    turn.tools.set(payload.tool_call_id, record);
    turn.items.push({ kind: "tool", key: payload.tool_call_id });
  }
  return record;
}

// --- rendering ----------------------------------------------------------------------------

function queueRender() {
  if (state.renderQueued) return;
  state.renderQueued = true;
  requestAnimationFrame(() => {
    state.renderQueued = false;
    const before = beginContentChange();
    const changed = renderTranscript();
    renderControls();
    afterContentChange(changed && document.scrollingElement.scrollHeight >= before);
  });
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function renderTranscript() {
  const transcript = $("transcript");
  const nodes = [];
  const snapshot = state.snapshot || { messages: [], tool_calls: [] };
  const cards = new Map();
  const records = new Map((snapshot.tool_calls || []).map((call) => [call.tool_call_id, call]));
  const outputs = new Map((snapshot.messages || [])
    .filter((message) => message.role === "tool")
    .map((message) => [message.tool_call_id, message.tool_output || ""]));
  for (const message of snapshot.messages || []) {
    const live = message.turn_id && state.live.has(message.turn_id);
    if (live && message.role !== "user") continue; // the live view shows this turn
    if (message.role === "tool" && cards.has(message.tool_call_id)) continue; // in its card
    if (message.tool_name && message.role === "assistant") {
      const record = records.get(message.tool_call_id);
      const output = outputs.get(message.tool_call_id);
      const status = record ? record.status : output === undefined ? "requested" : "done";
      const card = toolCard(message.tool_call_id, message.tool_name, message.tool_arguments,
        status, output);
      cards.set(message.tool_call_id, card);
      nodes.push(card);
      continue;
    }
    const text = message.text || message.tool_output || "";
    if (message.role === "user" && text.startsWith(STOPPED_NOTE_PREFIX)) {
      for (const partial of state.stopped.get(message.turn_id) || []) {
        nodes.push(messageNode("assistant", partial, "stopped: not sent"));
      }
    }
    nodes.push(messageNode(message.role, text));
  }
  const liveTurns = [...state.live.entries()].sort((a, b) => a[1].number - b[1].number);
  for (const [turnId, turn] of liveTurns) {
    for (const item of turn.items) {
      if (item.kind === "segment") {
        const segment = turn.segments.get(item.key);
        const node = element("div", `message assistant live ${segment.kind}`, segment.text);
        if (segment.kind === "reasoning_delta") node.prepend(element("span", "badge", "reasoning"));
        Object.assign(node.dataset, {
          turnId, stepExecutionId: segment.stepExecutionId, attempt: String(segment.attempt),
        });
        nodes.push(node);
      } else {
        const record = turn.tools.get(item.key);
        const stored = records.get(item.key);
        nodes.push(toolCard(record.toolCallId, record.toolName, stored && stored.arguments,
          stored ? stored.status : record.status, outputs.get(item.key)));
      }
    }
  }
  for (const queued of snapshot.steered_messages || []) {
    nodes.push(messageNode("user", queued.text, "steering the running turn"));
  }
  for (const queued of snapshot.queued_messages || []) {
    nodes.push(messageNode("user", queued.text, "queued"));
  }
  // Only a real change counts as news: a refresh that renders the same must not scroll.
  const html = nodes.map((node) => node.outerHTML).join("");
  if (html === state.renderedHtml) return false;
  state.renderedHtml = html;
  transcript.replaceChildren(...nodes);
  return true;
}

function messageNode(role, text, badge) {
  const isNote = role === "user" && text.startsWith(NOTE_PREFIX);
  const stopped = isNote && text.startsWith(STOPPED_NOTE_PREFIX);
  const partial = role === "assistant" && badge !== undefined;
  const kind = isNote ? `note${stopped ? " stopped" : ""}` : role;
  const queued = badge && !partial ? " queued" : "";
  const node = element("div", `message ${kind}${queued}${partial ? " stopped-text" : ""}`, text);
  node.dataset.role = isNote ? "note" : role;
  if (stopped) node.prepend(element("span", "badge", "turn stopped"));
  if (badge) node.prepend(element("span", "badge", badge));
  return node;
}

function toolCard(toolCallId, toolName, argumentsText, status, output) {
  const card = element("div", "tool-call");
  card.dataset.toolCallId = toolCallId;
  card.dataset.toolName = toolName;
  card.dataset.status = status;
  card.append(element("span", "tool-name", `${toolName}(${argumentsText || ""})`));
  card.append(element("span", "tool-status", status.replaceAll("_", " ")));
  const check = state.outcomeChecks.get(toolCallId);
  if (check) {
    card.dataset.outcomeCheck = check;
    const ranAgain = check === "not_applied" && status !== "failed";
    card.append(element("span", "outcome-check",
      ranAgain ? "ran again after a restart" : OUTCOME_CHECK_LABELS[check] || check));
  }
  if (output !== undefined) card.append(element("span", "tool-output", output));
  card.append(idDetails(`call ${toolCallId}`));
  return card;
}

function renderControls() {
  const current = state.snapshot && state.snapshot.state;
  const label = $("session-status");
  label.dataset.status = current ? current.status : "starting";
  label.textContent = current ? statusLabel(current) : "starting";
  const running = activeTurnId() !== null;
  $("stop").disabled = !running || state.stopping === activeTurnId();
  $("steer").disabled = !running;
}

// "running tools (turn 2)" for running_tools of turn-2; the raw status is data-status.
function statusLabel(current) {
  const label = STATUS_LABELS[current.status] || current.status.replaceAll("_", " ");
  const number = turnNumber(current.active_turn_id);
  return number ? `${label} (turn ${number})` : label;
}

// Prompts are kept by interrupt ID, so a refresh never drops what the user is typing.
function renderPrompts() {
  const prompts = $("prompts");
  const pending = (state.snapshot && state.snapshot.pending_interrupts) || [];
  const wanted = new Set(pending.map((interrupt) => interrupt.interrupt_id));
  for (const node of [...prompts.children]) {
    if (!wanted.has(node.dataset.interruptId)) node.remove();
  }
  for (const interrupt of pending) {
    if (prompts.querySelector(`[data-interrupt-id="${CSS.escape(interrupt.interrupt_id)}"]`)) continue;
    prompts.append(interrupt.kind === "question" ? questionPrompt(interrupt) : approvalPrompt(interrupt));
  }
}

function promptShell(interrupt, title) {
  const node = element("div", "prompt");
  node.dataset.interruptId = interrupt.interrupt_id;
  node.dataset.kind = interrupt.kind;
  node.dataset.toolName = interrupt.tool_name || "";
  node.append(element("h2", "", title));
  return node;
}

function approvalPrompt(interrupt) {
  const node = promptShell(interrupt, `Approve ${interrupt.tool_name}?`);
  node.append(element("code", "arguments", interrupt.arguments || ""));
  const row = element("div", "row");
  const reason = element("input", "reason");
  reason.placeholder = "Reason, if you reject (optional)";
  const approve = element("button", "approve", "Approve");
  const reject = element("button", "reject", "Reject");
  approve.type = reject.type = "button";
  approve.onclick = () => resolve(node, interrupt, { approved: true });
  reject.onclick = () => resolve(node, interrupt, {
    approved: false, rejection_message: reason.value.trim() || null,
  });
  row.append(reason, approve, reject);
  node.append(row);
  return node;
}

function questionPrompt(interrupt) {
  const node = promptShell(interrupt, interrupt.question || "The agent asks you");
  const row = element("div", "row");
  for (const choice of interrupt.choices || []) {
    const button = element("button", "choice", choice);
    button.type = "button";
    button.onclick = () => answer(node, interrupt, choice);
    row.append(button);
  }
  node.append(row);
  const free = element("div", "row");
  if (interrupt.allows_free_text) {
    const input = element("input", "answer-text");
    input.placeholder = "Your answer";
    const send = element("button", "answer", "Answer");
    send.type = "button";
    send.onclick = () => input.value.trim() && answer(node, interrupt, input.value.trim());
    free.append(input, send);
  }
  const decline = element("button", "decline", "Decline");
  decline.type = "button";
  decline.onclick = () => resolve(node, interrupt, { approved: false });
  free.append(decline);
  node.append(free);
  return node;
}

async function resolve(node, interrupt, body) {
  await settle(node, "resolve", body, body.approved ? "approve" : "reject");
}

async function answer(node, interrupt, text) {
  await settle(node, "answer", { answer: text }, "answer");
}

async function settle(node, route, body, action) {
  for (const button of node.querySelectorAll("button")) button.disabled = true;
  const interruptId = node.dataset.interruptId;
  try {
    const { accepted } = await api(
      sessionPath(`/interrupts/${encodeURIComponent(interruptId)}/${route}`), body);
    const what = `${action} ${node.dataset.toolName || "the request"}`;
    logAction(action, `${what}: ${accepted ? "sent" : "no longer pending"}`, accepted,
      `interrupt ${interruptId}`);
  } catch (error) {
    logAction(action, `${action} failed: ${error.message}`, false, `interrupt ${interruptId}`);
    for (const button of node.querySelectorAll("button")) button.disabled = false;
  }
  refreshSnapshot();
}

// --- composer -----------------------------------------------------------------------------

async function send(route, action) {
  const composer = $("composer");
  const text = composer.value.trim();
  if (!text) return;
  try {
    const { accepted } = await api(sessionPath(route), { text });
    if (accepted) composer.value = "";
    logAction(action, `${action}: ${accepted ? "sent" : "refused"}`, accepted);
  } catch (error) {
    logAction(action, `${action} failed: ${error.message}`, false);
  }
  refreshSnapshot();
}

async function stop() {
  const turnId = activeTurnId();
  if (!turnId || state.stopping === turnId) return;
  state.stopping = turnId;
  $("stop").disabled = true;
  try {
    const { accepted } = await api(sessionPath("/cancel"), { turn_id: turnId });
    const turn = `turn ${turnNumber(turnId)}`;
    logAction("stop", `stop ${turn}: ${accepted ? "requested" : "nothing to stop"}`, accepted);
  } catch (error) {
    logAction("stop", `stop failed: ${error.message}`, false);
  }
  refreshSnapshot();
}

$("composer-form").addEventListener("submit", (event) => {
  event.preventDefault();
  send("/messages", "send");
});
$("composer").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    send("/messages", "send");
  }
});
$("steer").addEventListener("click", () => send("/steer", "steer"));
$("stop").addEventListener("click", stop);
$("new-messages").addEventListener("click", scrollToNewest);

boot().catch((error) => {
  console.error(error);
  setConnection("failed");
  logAction("load", `loading the chat failed: ${error.message}`, false);
});
