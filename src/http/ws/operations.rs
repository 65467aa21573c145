//! A connection's messages: `connection_init`, operations started (each in a task of its
//! own, under the connection's and the user's shares) and stopped, pings, and the messages
//! an operation's end or failure sends in the connection's protocol.

#[allow(clippy::wildcard_imports)]
use super::*;

impl Connection {
    pub(super) fn is_running(&self, id: &str, generation: u64) -> bool {
        self.operations.get(id).is_some_and(|(g, _)| *g == generation)
    }

    /// Handles one client message: the messages to send back, or why to close.
    pub(super) async fn handle(&mut self, text: &str) -> Result<Vec<Message>, Closing> {
        let bad = |why: &str| Closing::new(4400, format!("Invalid message received: {why}"));
        let message: Value = serde_json::from_str(text).map_err(|_| bad("not JSON"))?;
        let kind = message.get("type").and_then(Value::as_str).ok_or_else(|| bad("no `type`"))?;
        let reply = |v: Value| Ok(vec![Message::Text(v.to_string().into())]);
        match (self.protocol, kind) {
            (_, "connection_init") => self.init(message.get("payload")).await,
            (Protocol::TransportWs, "ping") => reply(json!({"type": "pong"})),
            (Protocol::TransportWs, "pong") => Ok(Vec::new()),
            (Protocol::TransportWs, "subscribe") | (Protocol::Legacy, "start") => {
                let id = message.get("id").and_then(Value::as_str).filter(|id| !id.is_empty() && id.len() <= MAX_ID);
                let id = id.ok_or_else(|| bad("an operation needs a string `id` of 1 to 128 bytes"))?.to_owned();
                let request: async_graphql::Request = message
                    .get("payload")
                    .cloned()
                    .and_then(|p| serde_json::from_value(p).ok())
                    .ok_or_else(|| bad("the `payload` of an operation is a GraphQL request"))?;
                self.start(id, request).await
            }
            (Protocol::TransportWs, "complete") | (Protocol::Legacy, "stop") => {
                let id = message.get("id").and_then(Value::as_str).ok_or_else(|| bad("no `id`"))?;
                let stopped = self.operations.remove(id).map(|(_, task)| task.abort()).is_some();
                if stopped && self.protocol == Protocol::Legacy {
                    return reply(json!({"type": "complete", "id": id}));
                }
                Ok(Vec::new())
            }
            (Protocol::Legacy, "connection_terminate") => Err(Closing::new(1000, "Terminated by the client")),
            (_, other) => Err(bad(&format!("unknown message type `{other}`"))),
        }
    }

    async fn init(&mut self, payload: Option<&Value>) -> Result<Vec<Message>, Closing> {
        if self.init_received {
            return Err(Closing::new(4429, "Too many initialisation requests"));
        }
        self.init_received = true;
        let header =
            payload.and_then(|p| p.get("authorization").or_else(|| p.get("Authorization"))).and_then(Value::as_str);
        let hash = header.and_then(crate::http::bearer_token).map(auth::hash_token);
        let viewer = match &hash {
            None => Err(DomainError::Unauthenticated),
            Some(hash) => self.state.live.credentials.viewer_of_token(hash).await,
        };
        match viewer {
            Ok(v) => {
                // Now it counts against the server's connections and the user's share.
                let Ok(permit) = self.state.ws_connections.clone().try_acquire_owned() else {
                    let max = self.state.limits.ws.max_ws_connections;
                    return Err(Closing::new(
                        1013,
                        format!("Too many WebSocket connections (at most {max}); try again later"),
                    ));
                };
                let share = self
                    .state
                    .live
                    .shares
                    .take(v.user_id, Share::Connection)
                    .map_err(|e| Closing::new(1013, e.to_string()))?;
                self._permit = Some((permit, share));
                self.arrival = None;
                self.token_hash = hash.unwrap_or_default();
                self.viewer = Some(Arc::new(v));
                let mut msgs = vec![Message::Text(json!({"type": "connection_ack"}).to_string().into())];
                if self.protocol == Protocol::Legacy {
                    msgs.push(Message::Text(json!({"type": "ka"}).to_string().into()));
                }
                Ok(msgs)
            }
            Err(DomainError::Unauthenticated) => {
                let why = "Forbidden: send {\"authorization\": \"Bearer <token>\"} as the payload";
                let mut closing = Closing::new(4403, why);
                if self.protocol == Protocol::Legacy {
                    // The legacy protocol says so in a message before the close.
                    closing.before = Some(json!({"type": "connection_error", "payload": {"message": why}}).to_string());
                }
                Err(closing)
            }
            Err(e) => {
                tracing::error!(error = ?e, connection = %self.log_id, "authenticating a WebSocket failed");
                Err(Closing::new(1011, INTERNAL_MESSAGE))
            }
        }
    }

    /// Checks the connection's token again (through the credentials cache, or, `now`, from
    /// the database): the viewer as it is now, or a close with 4403 when the token
    /// authenticates nobody any more.
    pub(super) async fn authenticated(&mut self, now: bool) -> Result<(), Closing> {
        let credentials = &self.state.live.credentials;
        let viewer = if now {
            credentials.viewer_of_token_now(&self.token_hash).await
        } else {
            credentials.viewer_of_token(&self.token_hash).await
        };
        match viewer {
            Ok(v) => {
                if self.viewer.as_deref() != Some(&v) {
                    self.viewer = Some(Arc::new(v));
                }
                Ok(())
            }
            Err(DomainError::Unauthenticated) => {
                Err(Closing::new(4403, "Forbidden: the token of this connection no longer authenticates"))
            }
            // The database cannot say now: keep what we know, and ask again next time.
            Err(e) => {
                tracing::warn!(error = ?e, connection = %self.log_id, "checking a connection's credentials failed");
                Ok(())
            }
        }
    }

    /// The messages that refuse operation `id` with `err`.
    fn refuse(&self, id: &str, err: DomainError) -> Vec<Message> {
        let error = async_graphql::Error::from(ApiError(err)).into_server_error(async_graphql::Pos::default());
        let mut errors = vec![error];
        finalize_errors(&mut errors, &self.log_id, &self.state.limits.graphql);
        let errors = errors.iter().map(|e| serde_json::to_value(e).unwrap_or(Value::Null)).collect();
        failure(self.protocol, id, errors).into_iter().map(|t| Message::Text(t.into())).collect()
    }

    async fn start(&mut self, id: String, request: async_graphql::Request) -> Result<Vec<Message>, Closing> {
        if self.viewer.is_none() {
            return Err(Closing::new(4401, "Unauthorized: send connection_init first"));
        }
        if self.operations.contains_key(&id) {
            return Err(Closing::new(4409, format!("Subscriber for {id} already exists")));
        }
        // Every operation runs with the credentials as they are now.
        self.authenticated(false).await?;
        let Some(viewer) = self.viewer.clone() else {
            return Err(Closing::new(4401, "Unauthorized: send connection_init first"));
        };
        // Past the user's rate, refused at once: the connection goes on being read.
        if let Err(e) = self.state.live.shares.pace(viewer.user_id, 1) {
            return Ok(self.refuse(&id, e));
        }
        let max = self.state.limits.ws.max_subscriptions_per_connection;
        if self.operations.len() >= max {
            let error = json!({
                "message": format!("at most {max} operations may run at once on one connection"),
                "extensions": {"code": LIMIT_EXCEEDED},
            });
            return Ok(failure(self.protocol, &id, vec![error]).into_iter().map(|t| Message::Text(t.into())).collect());
        }
        let (request, operation) = match limits::admit(request, &self.state.limits.graphql, &self.state.documents) {
            Ok(admitted) => (admitted.request, admitted.operation),
            Err(refused) => {
                let mut errors = vec![refused];
                finalize_errors(&mut errors, &self.log_id, &self.state.limits.graphql);
                let errors = errors.iter().map(|e| serde_json::to_value(e).unwrap_or(Value::Null)).collect();
                return Ok(failure(self.protocol, &id, errors).into_iter().map(|t| Message::Text(t.into())).collect());
            }
        };
        // A mutation is authenticated from the database, as over HTTP: a token revoked a
        // moment ago changes nothing, whatever the cache still holds.
        let viewer = if operation.as_ref().is_some_and(|o| o.ty == OperationType::Mutation) {
            self.authenticated(true).await?;
            self.viewer.clone().unwrap_or(viewer)
        } else {
            viewer
        };
        let subscription = operation.as_ref().is_some_and(|o| o.ty == OperationType::Subscription);
        if subscription && !operation.as_ref().is_some_and(|o| o.single_root_field) {
            let error = json!({
                "message": "a subscription selects exactly one root field, without fragments",
                "extensions": {"code": GRAPHQL_VALIDATION_FAILED},
            });
            return Ok(failure(self.protocol, &id, vec![error]).into_iter().map(|t| Message::Text(t.into())).collect());
        }
        // A subscription is one of the user's share of them; a query or a mutation one of
        // the requests the server answers at once, as over HTTP.
        let held = if subscription {
            match self.state.live.shares.take(viewer.user_id, Share::Subscription) {
                Ok(share) => Hold::Share(share),
                Err(e) => return Ok(self.refuse(&id, e)),
            }
        } else {
            match self.state.in_flight.clone().try_acquire_owned() {
                Ok(permit) => Hold::InFlight(permit),
                Err(_) => {
                    let max = self.state.limits.max_in_flight;
                    let error = json!({
                        "message": format!("the server is answering as many requests as it may at once ({max}); retry after {} s", crate::http::RETRY_AFTER_SECONDS),
                        "extensions": {"code": UNAVAILABLE},
                    });
                    return Ok(failure(self.protocol, &id, vec![error])
                        .into_iter()
                        .map(|t| Message::Text(t.into()))
                        .collect());
                }
            }
        };
        // Queries and mutations get the time limit they have over HTTP; a subscription runs
        // until it ends or is stopped.
        let timeout = (!subscription).then(|| Duration::from_millis(self.state.limits.request_timeout_ms));
        self.generation += 1;
        let generation = self.generation;
        let request = prepare_long_lived(request, &self.state.db, (*viewer).clone(), &self.state.limits.graphql);
        // A query's or mutation's answer has its roots settled as over HTTP.
        let roots = operation.filter(|o| o.ty != OperationType::Subscription);
        let stream = futures_util::StreamExt::map(self.state.schema.execute_stream(request), move |mut answer| {
            if let Some(op) = &roots {
                crate::graphql::roots::settle(&mut answer.data, op, &answer.errors);
            }
            answer
        });
        let run = Run {
            tx: self.out_tx.clone(),
            protocol: self.protocol,
            id: id.clone(),
            generation,
            limits: self.state.limits.clone(),
        };
        let log_id = self.log_id.clone();
        let task = tokio::spawn(async move {
            let _held = held;
            match timeout {
                None => run.forward(stream, &log_id).await,
                Some(limit) => {
                    if tokio::time::timeout(limit, run.forward(stream, &log_id)).await.is_err() {
                        let error = json!({
                            "message": format!("the operation took longer than {} ms", limit.as_millis()),
                            "extensions": {"code": LIMIT_EXCEEDED},
                        });
                        run.last(failure(run.protocol, &run.id, vec![error])).await;
                    }
                }
            }
        });
        self.operations.insert(id, (generation, task.abort_handle()));
        Ok(Vec::new())
    }
}

/// What a running operation holds until it ends.
enum Hold {
    /// A subscription: one of the user's share.
    Share(#[allow(dead_code)] Held),
    /// A query or mutation: one of the requests answered at once.
    InFlight(#[allow(dead_code)] OwnedSemaphorePermit),
}

/// One running operation's way to its connection.
struct Run {
    tx: mpsc::Sender<Out>,
    protocol: Protocol,
    id: String,
    generation: u64,
    limits: Arc<crate::config::HttpLimits>,
}

impl Run {
    /// Sends each response of `stream`, then `complete`; an error that left no data ends
    /// the operation with an error message instead (refused, invalid, lagged).
    async fn forward(
        &self,
        mut stream: impl futures_util::Stream<Item = async_graphql::Response> + Unpin,
        log_id: &str,
    ) {
        let kind = if self.protocol == Protocol::Legacy { "data" } else { "next" };
        // The id once as JSON: each message is then written straight from the response.
        let id = serde_json::to_string(&self.id).unwrap_or_default();
        while let Some(mut response) = stream.next().await {
            finalize_errors(&mut response.errors, log_id, &self.limits.graphql);
            if response.data == async_graphql::Value::Null && !response.errors.is_empty() {
                let errors = response.errors.iter().map(|e| serde_json::to_value(e).unwrap_or(Value::Null));
                self.last(failure(self.protocol, &self.id, errors.collect())).await;
                return;
            }
            let Ok(payload) = serde_json::to_string(&response) else {
                tracing::error!(connection = %log_id, "could not serialize a response");
                continue;
            };
            let text = format!(r#"{{"type":"{kind}","id":{id},"payload":{payload}}}"#);
            if self.tx.send(Out::Text(text, self.id.clone(), self.generation)).await.is_err() {
                return;
            }
        }
        self.last(vec![json!({"type": "complete", "id": self.id}).to_string()]).await;
    }

    async fn last(&self, texts: Vec<String>) {
        let _ = self.tx.send(Out::Last(texts, self.id.clone(), self.generation)).await;
    }
}

/// The messages that end operation `id` with `errors`: `error` in graphql-transport-ws
/// (which ends the operation by itself); `data` with the errors, then `complete`, in the
/// legacy protocol.
fn failure(protocol: Protocol, id: &str, errors: Vec<Value>) -> Vec<String> {
    match protocol {
        Protocol::TransportWs => vec![json!({"type": "error", "id": id, "payload": errors}).to_string()],
        Protocol::Legacy => vec![
            json!({"type": "data", "id": id, "payload": {"data": null, "errors": errors}}).to_string(),
            json!({"type": "complete", "id": id}).to_string(),
        ],
    }
}
