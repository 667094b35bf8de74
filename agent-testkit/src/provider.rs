//! A local HTTP/1.1 server for tests of model providers: it records every request
//! and answers each with the next scripted [`Reply`] — a status, headers, a body,
//! optionally late, cut short or streamed as server-sent events, event by
//! event — so provider faults can be tested with no
//! internet and no key.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct Reply {
    /// HTTP status code.
    pub status: u16,
    /// Extra response headers.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
    /// Wait this long before answering.
    pub delay: Duration,
    /// Send only this many body bytes, then close (the length header stays whole).
    pub cut_after: Option<usize>,
    /// Reset the connection (RST) instead of answering.
    pub reset: bool,
    /// A streamed body instead of `body`: these server-sent events, one write
    /// each, then the connection closes (`text/event-stream`, no length).
    pub events: Option<Vec<String>>,
    /// The pause between two streamed events.
    pub pace: Duration,
    /// Before streaming event `.0`, wait until `.1` is notified.
    pub hold: Option<(usize, Arc<Notify>)>,
}

impl PartialEq for Reply {
    fn eq(&self, other: &Self) -> bool {
        self.status == other.status
            && self.headers == other.headers
            && self.body == other.body
            && self.delay == other.delay
            && self.cut_after == other.cut_after
            && self.reset == other.reset
            && self.events == other.events
            && self.pace == other.pace
            && self.hold.as_ref().map(|(index, _)| *index)
                == other.hold.as_ref().map(|(index, _)| *index)
    }
}

impl Eq for Reply {}

impl Reply {
    /// A 200 with a JSON body.
    pub fn json(body: &Value) -> Self {
        Self::status(200, body.to_string())
    }

    /// A reply with `status` and `body`.
    pub fn status(status: u16, body: impl Into<String>) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: body.into(),
            delay: Duration::ZERO,
            cut_after: None,
            reset: false,
            events: None,
            pace: Duration::ZERO,
            hold: None,
        }
    }

    /// A 200 streaming `data` as server-sent events (`data: …`, each an event
    /// of its own, `event: NAME` first where a pair names one), then closing
    /// the connection — without a final event the client expects, that is a
    /// stream dropped mid-way.
    pub fn stream<'a>(events: impl IntoIterator<Item = (Option<&'a str>, String)>) -> Self {
        let events = events
            .into_iter()
            .map(|(name, data)| match name {
                Some(name) => format!("event: {name}\ndata: {data}\n\n"),
                None => format!("data: {data}\n\n"),
            })
            .collect();
        Self {
            events: Some(events),
            ..Self::status(200, "")
        }
    }

    /// Pauses `pace` between streamed events.
    pub fn paced(mut self, pace: Duration) -> Self {
        self.pace = pace;
        self
    }

    /// Streams events up to `index` (exclusive), then waits until `gate` is
    /// notified before the rest.
    pub fn hold_before(mut self, index: usize, gate: Arc<Notify>) -> Self {
        self.hold = Some((index, gate));
        self
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Answers late.
    pub fn delayed(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Resets the connection without a byte of answer.
    pub fn reset(mut self) -> Self {
        self.reset = true;
        self
    }

    /// Cuts the body after `bytes` bytes.
    pub fn cut(mut self, bytes: usize) -> Self {
        self.cut_after = Some(bytes);
        self
    }
}

/// A request the server received.
#[derive(Debug, Clone, PartialEq)]
pub struct Received {
    /// Method and path, such as `POST /v1/chat/completions`.
    pub request_line: String,
    /// Header names (lower-case) and values.
    pub headers: Vec<(String, String)>,
    /// The body as JSON (`Null` if it was not JSON).
    pub body: Value,
}

impl Received {
    /// The value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// Decides the reply to one request from the request itself.
pub type Responder = Box<dyn Fn(&Received) -> Reply + Send + Sync>;

#[derive(Default)]
struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    received: Mutex<Vec<Received>>,
    responder: Option<Responder>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("replies", &self.replies)
            .field("received", &self.received)
            .field("responder", &self.responder.is_some())
            .finish()
    }
}

/// A running fake provider; stops when dropped.
#[derive(Debug)]
pub struct FakeProvider {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeProvider {
    /// Starts a server on a free loopback port that answers with `replies` in order
    /// (and with 500 once they run out).
    pub async fn start(replies: Vec<Reply>) -> std::io::Result<Self> {
        Self::serve(Shared {
            replies: Mutex::new(replies.into()),
            ..Shared::default()
        })
        .await
    }

    /// Starts a server on a free loopback port that answers each request with
    /// what `responder` makes of it (for conversations whose order of requests
    /// is not known in advance).
    pub async fn answering(
        responder: impl Fn(&Received) -> Reply + Send + Sync + 'static,
    ) -> std::io::Result<Self> {
        Self::serve(Shared {
            responder: Some(Box::new(responder)),
            ..Shared::default()
        })
        .await
    }

    async fn serve(shared: Shared) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(shared);
        let state = Arc::clone(&shared);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = Arc::clone(&state);
                tokio::spawn(async move {
                    let _ = serve(stream, &state).await;
                });
            }
        });
        Ok(Self { addr, shared, task })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received so far.
    pub fn received(&self) -> Vec<Received> {
        self.shared
            .received
            .lock()
            .map(|received| received.clone())
            .unwrap_or_default()
    }
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(mut stream: TcpStream, shared: &Shared) -> std::io::Result<()> {
    let mut data = Vec::new();
    let mut buffer = [0u8; 8192];
    let head_end = loop {
        let read = stream.read(&mut buffer).await?;
        if read == 0 {
            return Ok(());
        }
        data.extend_from_slice(buffer.get(..read).unwrap_or_default());
        if let Some(end) = data.windows(4).position(|window| window == b"\r\n\r\n") {
            break end;
        }
    };
    let head = String::from_utf8_lossy(data.get(..head_end).unwrap_or_default()).to_string();
    let mut lines = head.split("\r\n");
    let request_line = lines
        .next()
        .unwrap_or_default()
        .rsplit_once(' ')
        .map_or_else(String::new, |(line, _)| line.to_owned());
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    let mut body = data.get(head_end + 4..).unwrap_or_default().to_vec();
    while body.len() < length {
        let read = stream.read(&mut buffer).await?;
        if read == 0 {
            break;
        }
        body.extend_from_slice(buffer.get(..read).unwrap_or_default());
    }
    let request = Received {
        request_line,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    let answer = shared.responder.as_ref().map(|respond| respond(&request));
    if let Ok(mut received) = shared.received.lock() {
        received.push(request);
    }
    let reply = answer
        .or_else(|| {
            shared
                .replies
                .lock()
                .ok()
                .and_then(|mut replies| replies.pop_front())
        })
        .unwrap_or_else(|| Reply::status(500, r#"{"error":"no scripted reply left"}"#));
    tokio::time::sleep(reply.delay).await;
    if reply.reset {
        stream.set_zero_linger()?;
        drop(stream);
        return Ok(());
    }
    if let Some(events) = &reply.events {
        return stream_events(stream, &reply, events).await;
    }
    let mut response = format!(
        "HTTP/1.1 {} Scripted\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        reply.status,
        reply.body.len()
    );
    for (name, value) in &reply.headers {
        response.push_str(&format!("{name}: {value}\r\n"));
    }
    response.push_str("\r\n");
    stream.write_all(response.as_bytes()).await?;
    let body = reply.body.as_bytes();
    let sent = reply
        .cut_after
        .map_or(body.len(), |cut| cut.min(body.len()));
    stream
        .write_all(body.get(..sent).unwrap_or_default())
        .await?;
    stream.flush().await?;
    stream.shutdown().await
}

async fn stream_events(
    mut stream: TcpStream,
    reply: &Reply,
    events: &[String],
) -> std::io::Result<()> {
    let mut response = format!(
        "HTTP/1.1 {} Scripted\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n",
        reply.status
    );
    for (name, value) in &reply.headers {
        response.push_str(&format!("{name}: {value}\r\n"));
    }
    response.push_str("\r\n");
    stream.write_all(response.as_bytes()).await?;
    stream.flush().await?;
    for (index, event) in events.iter().enumerate() {
        if let Some((held, gate)) = &reply.hold
            && *held == index
        {
            gate.notified().await;
        }
        if index > 0 {
            tokio::time::sleep(reply.pace).await;
        }
        stream.write_all(event.as_bytes()).await?;
        stream.flush().await?;
    }
    stream.shutdown().await
}
