//! One round of tool calls inside a reply. The model's calls are started at once, each in its own task
//! (a tool's HTTP request, a guardrail's moderation check), and recorded in the history with the
//! assistant message that made them, before anything is awaited. Then, in order: each tool's `on_start`
//! message is spoken; each result is awaited (its `on_delay` message spoken if it takes longer than the
//! tool's delay), goes into the history right after the calls' message, is reported as a `tool_call`
//! event, and its `on_success` / `on_error` message is spoken.
//!
//! A barge-in drops the reply at any await: the calls are not cancelled (their tasks run on) and never
//! repeated; their results enter the history when the next reply starts (`settle_quietly`), before its
//! request, without speaking anything. Their `tool_call` events carry the interrupted reply's epoch, so
//! the conversation drops them: `agent.interrupted` is the interrupted turn's last event.
//!
//! A guardrail with a `response_message` answers the turn itself: the message is spoken verbatim, the
//! round's other calls are not run, and the model is not asked again this turn.

use std::collections::VecDeque;

use serde_json::{Map, Value, json};
use tokio::task::JoinHandle;

use super::{Reply, ReplyOutput, Responder};
use crate::actions::Action;
use crate::actions::api_tool::EventMessages;
use crate::actions::{guardrail, moderation};
use crate::core::Epoch;
use crate::events::EventKind;
use crate::providers::ProviderError;
use crate::providers::llm::{ChatMessage, ToolCall};

/// How a round ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RoundEnd {
    /// The results are in the history: ask the model again.
    AskAgain,
    /// A guardrail's fixed reply was spoken: the turn is answered.
    Answered,
}

/// A round's calls that have not settled yet.
pub(super) struct CallsInFlight {
    /// History index of the next result: after the assistant message that made the calls, and after
    /// the results already in.
    insert_at: usize,
    calls: VecDeque<RunningCall>,
}

struct RunningCall {
    call: ToolCall,
    parameters: Value,
    /// Reported as a `tool_call` event (tools; not guardrails).
    reported: bool,
    messages: EventMessages,
    started: tokio::time::Instant,
    /// The epoch of the reply that made the call (its `tool_call` event carries it).
    epoch: Epoch,
    task: JoinHandle<Result<Value, String>>,
}

/// A call's result as the `tool_call` event and the model read it: the tool's JSON object, other JSON
/// as `{"result": …}`, an error as `{"error": …}`.
pub fn result_object(outcome: &Result<Value, String>) -> Value {
    match outcome {
        Ok(Value::Object(object)) => Value::Object(object.clone()),
        Ok(other) => json!({ "result": other }),
        Err(error) => json!({ "error": error }),
    }
}

fn finished(result: Result<Value, String>) -> JoinHandle<Result<Value, String>> {
    tokio::spawn(async move { result })
}

impl Responder {
    /// Starts the model's `calls` for `user_text`'s turn, speaks their messages, and waits for their
    /// results (see the module's description).
    pub(super) async fn run_tool_calls(
        &mut self,
        reply: &Reply,
        user_text: &str,
        calls: Vec<ToolCall>,
        out: &mut (dyn FnMut(ReplyOutput) + Send),
    ) -> Result<RoundEnd, ProviderError> {
        self.history.push(ChatMessage::tool_calls(calls.clone()));
        let fixed_reply = calls.iter().find_map(|call| match self.actions.find(&call.name) {
            Some(Action::Guardrail(g)) if !g.response_message.is_empty() => Some(g.response_message.clone()),
            _ => None,
        });
        let mut running = VecDeque::with_capacity(calls.len());
        for call in calls {
            running.push_back(self.start_call(call, user_text, fixed_reply.is_some(), reply.epoch));
        }
        let starts: Vec<String> = running.iter().map(|c| c.messages.on_start.clone()).collect();
        self.in_flight = Some(CallsInFlight { insert_at: self.history.len(), calls: running });
        for message in starts.into_iter().filter(|m| !m.is_empty()) {
            self.speak(reply, message, out).await?;
        }
        self.settle(Some(reply), out).await?;
        match fixed_reply {
            Some(message) => {
                self.speak(reply, message, out).await?;
                Ok(RoundEnd::Answered)
            }
            None => Ok(RoundEnd::AskAgain),
        }
    }

    /// Starts one call; with `guardrail_answers`, tools are not run (a guardrail answers the turn).
    fn start_call(&mut self, call: ToolCall, user_text: &str, guardrail_answers: bool, epoch: Epoch) -> RunningCall {
        let parameters: Result<Map<String, Value>, String> = match call.arguments.trim() {
            "" => Ok(Map::new()),
            text => serde_json::from_str(text).map_err(|_| format!("the arguments are not a JSON object: {text}")),
        };
        let shown = parameters.clone().map(Value::Object).unwrap_or_else(|_| json!({}));
        let none = EventMessages::default();
        let (reported, messages, task) = match (self.actions.find(&call.name), parameters) {
            (Some(Action::Guardrail(g)), _) => {
                if !g.callback_url.is_empty() {
                    let settings = &self.actions.settings;
                    let now = chrono::Utc::now().timestamp_micros() as f64 / 1e6;
                    let body = g.triggered_body(&settings.conversation_id, user_text, now);
                    let client = &self.actions.callback_client;
                    let allow = settings.allow_private_urls;
                    let sent = guardrail::notify(client, &g.callback_url, &settings.webhook_secret, body, allow);
                    self.callbacks.retain(|sending| !sending.is_finished());
                    self.callbacks.extend(sent);
                }
                let task = if g.response_message.is_empty() {
                    let (llm, model) = (self.llm.0.clone(), self.llm.1.clone());
                    let endpoint = self.moderation.clone();
                    let (g, message) = (g.clone(), user_text.to_string());
                    tokio::spawn(async move {
                        let verdict = moderation::moderate(endpoint.as_ref(), llm.as_ref(), &model, &g, &message).await;
                        Ok(verdict.result(&g))
                    })
                } else {
                    finished(Ok(json!({ "guardrail": g.key, "fired": true, "spoken": g.response_message })))
                };
                (false, none, task)
            }
            (Some(Action::Tool(_)), _) if guardrail_answers => {
                (true, none, finished(Err("not run: a guardrail answered this turn".into())))
            }
            (Some(Action::Tool(tool)), Ok(arguments)) => {
                let (tool_owned, client) = (tool.clone(), self.actions.client.clone());
                let allow_private = self.actions.settings.allow_private_urls;
                let task = tokio::spawn(async move { tool_owned.call(&client, allow_private, &arguments).await });
                (true, tool.messages.clone(), task)
            }
            (Some(Action::Tool(tool)), Err(error)) => (true, tool.messages.clone(), finished(Err(error))),
            (Some(Action::Mcp(_)), _) if guardrail_answers => {
                (true, none, finished(Err("not run: a guardrail answered this turn".into())))
            }
            (Some(Action::Mcp(tool)), Ok(arguments)) => {
                let tool = tool.clone();
                (true, none, tokio::spawn(async move { tool.call(arguments).await }))
            }
            (Some(Action::Mcp(_)), Err(error)) => (true, none, finished(Err(error))),
            (None, _) => (true, none, finished(Err(format!("there is no tool named \"{}\"", call.name)))),
        };
        let started = tokio::time::Instant::now();
        RunningCall { call, parameters: shown, reported, messages, started, epoch, task }
    }

    /// Waits (`CALLBACK_TIMEOUT` at most) for the guardrail callbacks still being sent: before a run
    /// that owns its runtime ends (`confab simulate`).
    pub async fn finish_callbacks(&mut self) {
        let sending = futures_util::future::join_all(self.callbacks.drain(..));
        let _ = tokio::time::timeout(guardrail::CALLBACK_TIMEOUT, sending).await;
    }

    /// Results of calls an interrupted reply left running, into the history (nothing is spoken).
    pub(super) async fn settle_quietly(&mut self, out: &mut (dyn FnMut(ReplyOutput) + Send)) {
        if let Err(err) = self.settle(None, out).await {
            tracing::warn!(error = %err, "could not settle earlier tool calls");
        }
    }

    /// Waits for the calls in flight in order; with `reply`, speaks their delay and outcome messages.
    async fn settle(
        &mut self,
        reply: Option<&Reply>,
        out: &mut (dyn FnMut(ReplyOutput) + Send),
    ) -> Result<(), ProviderError> {
        loop {
            let Some(front) = self.in_flight.as_mut().and_then(|f| f.calls.front_mut()) else {
                self.in_flight = None;
                return Ok(());
            };
            let delay = front.messages.on_delay.clone().filter(|_| reply.is_some());
            let outcome = match delay {
                Some((after, message)) => {
                    match tokio::time::timeout_at(front.started + after, &mut front.task).await {
                        Ok(joined) => joined,
                        Err(_) => {
                            if let Some(reply) = reply {
                                self.speak(reply, message, out).await?;
                            }
                            let front = self.in_flight.as_mut().and_then(|f| f.calls.front_mut()).expect("still there");
                            front.messages.on_delay = None; // said once
                            continue;
                        }
                    }
                }
                None => (&mut front.task).await,
            };
            let outcome = outcome.unwrap_or_else(|err| Err(format!("the call failed: {err}")));
            let in_flight = self.in_flight.as_mut().expect("in flight");
            let done = in_flight.calls.pop_front().expect("front");
            let result = result_object(&outcome);
            self.history.insert(in_flight.insert_at, ChatMessage::tool_result(&done.call.id, &result));
            in_flight.insert_at += 1;
            if done.reported {
                let kind =
                    EventKind::ToolCall { tool_name: done.call.name.clone(), parameters: done.parameters, result };
                out(ReplyOutput::Event { epoch: done.epoch, kind });
            }
            if let Some(reply) = reply {
                let said = if outcome.is_ok() { done.messages.on_success } else { done.messages.on_error };
                if !said.is_empty() {
                    self.speak(reply, said, out).await?;
                }
            }
        }
    }
}
