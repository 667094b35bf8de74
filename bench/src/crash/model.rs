//! The harness's model: an OpenAI-compatible server on loopback that answers
//! each session's requests from its script — the step is the number of
//! assistant turns the request holds, plus one — and counts every answer by
//! session, step and process (each process the harness starts has an API key
//! of its own, which names it). A model call the runtime made twice is a step
//! answered twice; the only one allowed is the request a killed process had
//! in flight: its answer may have died with it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use agent_testkit::{FakeProvider, Received, Reply};
use serde_json::{Value, json};

use super::plan::SessionPlan;

/// One answer the server gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The session's task.
    pub task: String,
    /// The step answered (1 for the first model call).
    pub step: usize,
    /// The process that asked (its API key).
    pub process: String,
}

#[derive(Default)]
struct Book {
    /// Each session's replies by task, one per step.
    scripts: HashMap<String, Vec<Value>>,
    answers: Vec<Answer>,
}

/// The running server; stops when dropped.
pub struct ModelServer {
    provider: FakeProvider,
    book: Arc<Mutex<Book>>,
}

impl ModelServer {
    /// Starts the server on a free loopback port.
    pub async fn start() -> anyhow::Result<Self> {
        let book = Arc::new(Mutex::new(Book::default()));
        let answering = Arc::clone(&book);
        let provider = FakeProvider::answering(move |request| answer(&answering, request)).await?;
        Ok(Self { provider, book })
    }

    /// The model spec that sends a session's requests here.
    pub fn spec(&self) -> String {
        format!("openai:crash@{}/v1", self.provider.url())
    }

    /// Makes `plan`'s script the answers to its session.
    pub fn add(&self, plan: &SessionPlan) -> anyhow::Result<()> {
        let replies = plan.responses().iter().map(chat_completion).collect();
        self.book()?.scripts.insert(plan.task.clone(), replies);
        Ok(())
    }

    /// Every answer so far, in order.
    pub fn answers(&self) -> anyhow::Result<Vec<Answer>> {
        Ok(self.book()?.answers.clone())
    }

    fn book(&self) -> anyhow::Result<std::sync::MutexGuard<'_, Book>> {
        self.book
            .lock()
            .map_err(|_| anyhow::anyhow!("the model server's book is poisoned"))
    }
}

/// The reply to one request, noted in the book.
fn answer(book: &Mutex<Book>, request: &Received) -> Reply {
    let messages = request
        .body
        .get("messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let role = |message: &Value, role: &str| message.get("role") == Some(&json!(role));
    let task = messages
        .iter()
        .find(|message| role(message, "user"))
        .and_then(|message| message.get("content"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let step = 1 + messages
        .iter()
        .filter(|message| role(message, "assistant"))
        .count();
    let process = request
        .header("authorization")
        .and_then(|value| value.strip_prefix("Bearer "))
        .unwrap_or("unnamed")
        .to_owned();
    let Ok(mut book) = book.lock() else {
        return Reply::status(500, r#"{"error":"the book is poisoned"}"#);
    };
    let Some(reply) = book
        .scripts
        .get(&task)
        .and_then(|replies| replies.get(step - 1))
        .cloned()
    else {
        return Reply::status(
            400,
            json!({"error": {"message": format!("no step {step} for the task `{task}`")}})
                .to_string(),
        );
    };
    book.answers.push(Answer {
        task,
        step,
        process,
    });
    Reply::json(&reply)
}

/// A scripted response (`tool_call`, `tool_calls` or `finish`) as the Chat
/// Completions API answers it.
fn chat_completion(response: &Value) -> Value {
    let field = |value: &Value, name: &str| value.get(name).cloned().unwrap_or(Value::Null);
    let calls: Vec<&Value> = match response.get("type").and_then(Value::as_str) {
        Some("tool_call") => vec![response],
        Some("tool_calls") => response
            .get("calls")
            .and_then(Value::as_array)
            .map(|calls| calls.iter().collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    let message = if calls.is_empty() {
        json!({"role": "assistant", "content": field(response, "answer")})
    } else {
        json!({
            "role": "assistant",
            "content": null,
            "tool_calls": calls.iter().enumerate().map(|(index, call)| json!({
                "id": format!("call_{}", index + 1),
                "type": "function",
                "function": {
                    "name": field(call, "tool_name"),
                    "arguments": field(call, "arguments").to_string(),
                },
            })).collect::<Vec<_>>(),
        })
    };
    json!({
        "id": "crash",
        "object": "chat.completion",
        "model": "crash",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    })
}

/// What the answers say about model calls made twice.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reasked {
    /// Requests answered.
    pub requests: usize,
    /// Steps answered again after their first answer went to a process that
    /// was killed with that request in flight (allowed).
    pub in_killed_request: usize,
    /// Steps answered again for any other reason: a response the runtime
    /// received and then lost (must be 0).
    pub outside_killed_request: usize,
    /// What went wrong, for people (the first few).
    pub problems: Vec<String>,
}

/// Checks the answers of the sessions whose tasks are `tasks`, given the
/// processes that were killed.
pub fn reasked(answers: &[Answer], tasks: &BTreeSet<&str>, killed: &BTreeSet<String>) -> Reasked {
    let mine: Vec<&Answer> = answers
        .iter()
        .filter(|answer| tasks.contains(answer.task.as_str()))
        .collect();
    let mut found = Reasked {
        requests: mine.len(),
        ..Reasked::default()
    };
    // The last request each process made for each session: the one a kill
    // may have cut off.
    let mut last_of: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for (index, answer) in mine.iter().enumerate() {
        last_of.insert((answer.process.as_str(), answer.task.as_str()), index);
    }
    let mut steps: BTreeMap<(&str, usize), Vec<usize>> = BTreeMap::new();
    for (index, answer) in mine.iter().enumerate() {
        steps
            .entry((answer.task.as_str(), answer.step))
            .or_default()
            .push(index);
    }
    for ((task, step), indexes) in steps {
        let Some((_, earlier)) = indexes.split_last() else {
            continue;
        };
        for index in earlier {
            let Some(answer) = mine.get(*index) else {
                continue;
            };
            let cut_off = killed.contains(&answer.process)
                && last_of.get(&(answer.process.as_str(), task)) == Some(index);
            if cut_off {
                found.in_killed_request += 1;
            } else {
                found.outside_killed_request += 1;
                if found.problems.len() < 20 {
                    found.problems.push(format!(
                        "`{task}` step {step} was answered again after {} received it{}",
                        answer.process,
                        if killed.contains(&answer.process) {
                            " and asked for more before it was killed"
                        } else {
                            ", which was never killed"
                        }
                    ));
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    #![allow(clippy::indexing_slicing)]

    use super::*;

    fn answer(task: &str, step: usize, process: &str) -> Answer {
        Answer {
            task: task.into(),
            step,
            process: process.into(),
        }
    }

    #[test]
    fn only_the_request_a_killed_process_had_in_flight_may_be_asked_again() {
        let answers = [
            answer("a", 1, "p1"),
            answer("a", 2, "p1"),
            answer("a", 2, "p2"),
            answer("b", 1, "p3"),
            answer("b", 2, "p3"),
            answer("b", 1, "p4"),
            answer("c", 1, "p5"),
            answer("c", 1, "p6"),
        ];
        let tasks = BTreeSet::from(["a", "b", "c"]);
        let killed = BTreeSet::from(["p1".to_owned(), "p3".to_owned()]);
        let found = reasked(&answers, &tasks, &killed);
        assert_eq!(found.requests, 8);
        assert_eq!(found.in_killed_request, 1, "a step 2 was p1's last request");
        assert_eq!(
            found.outside_killed_request, 2,
            "b step 1 was not p3's last request; p5 was never killed: {:?}",
            found.problems
        );
    }

    #[test]
    fn a_scripted_call_becomes_a_chat_completion_tool_call() {
        let reply = chat_completion(&json!({"type": "tool_call", "tool_name": "calculator",
            "arguments": {"left": 1, "operation": "add", "right": 2}}));
        let call = &reply["choices"][0]["message"]["tool_calls"][0];
        assert_eq!(call["function"]["name"], "calculator");
        assert_eq!(
            call["function"]["arguments"],
            r#"{"left":1,"operation":"add","right":2}"#
        );
        let finish = chat_completion(&json!({"type": "finish", "answer": "done"}));
        assert_eq!(finish["choices"][0]["message"]["content"], "done");
    }
}
