//! slurmrestd's REST API, as much of it as the engine uses: the API version offered,
//! the partition's nodes, the jobs, submit, signal and cancel. Authenticated with a JWT
//! (`X-SLURM-USER-NAME`, `X-SLURM-USER-TOKEN`), read from its file or variable at each
//! request, so a token renewed in place is used at once.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::domain::runtime::engines::SlurmSettings;

/// The API versions this engine speaks, newest first.
pub const VERSIONS: &[&str] = &["v0.0.38"];

/// Why a request failed: Slurm did not answer (down, unreachable, timed out), or it answered
/// with an error (refused: a bad request, a bad token).
#[derive(Debug, Clone)]
pub enum SlurmError {
    Unreachable(String),
    Refused(String),
}

impl std::fmt::Display for SlurmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SlurmError::Unreachable(why) => write!(f, "slurmrestd does not answer: {why}"),
            SlurmError::Refused(why) => write!(f, "Slurm refused: {why}"),
        }
    }
}

pub struct Client {
    http: reqwest::Client,
    settings: SlurmSettings,
    version: std::sync::Mutex<Option<String>>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Node {
    pub name: String,
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub state_flags: Vec<String>,
    #[serde(default)]
    pub cpus: i64,
    /// MiB.
    #[serde(default)]
    pub real_memory: i64,
    #[serde(default)]
    pub gres: String,
    #[serde(default)]
    pub partitions: Vec<String>,
    #[serde(default)]
    pub reason: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Job {
    pub job_id: i64,
    #[serde(default)]
    pub job_state: String,
    #[serde(default)]
    pub state_reason: String,
    #[serde(default)]
    pub state_description: String,
    /// A wait status: `exit << 8`, or the signal.
    #[serde(default)]
    pub exit_code: Option<i64>,
    #[serde(default)]
    pub nodes: String,
    #[serde(default)]
    pub batch_host: String,
    #[serde(default)]
    pub comment: String,
    #[serde(default)]
    pub partition: String,
    #[serde(default)]
    pub restart_cnt: i64,
    #[serde(default)]
    pub priority: i64,
    #[serde(default)]
    pub submit_time: i64,
    #[serde(default)]
    pub start_time: i64,
}

/// What a job is asked to be.
pub struct JobSpec {
    pub name: String,
    pub comment: String,
    pub script: String,
    pub nodes: i64,
    pub tasks: i64,
    pub cpus_per_task: i64,
    pub memory_per_node_mib: i64,
    pub gpus_per_node: i64,
    pub time_limit_minutes: Option<i64>,
    pub environment: Vec<(String, String)>,
    pub output: String,
    pub work_dir: String,
}

impl Client {
    pub fn new(settings: SlurmSettings) -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(3))
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        let version = settings.api_version.clone();
        Self { http, settings, version: std::sync::Mutex::new(version) }
    }

    pub fn settings(&self) -> &SlurmSettings {
        &self.settings
    }

    /// The API version in use, once known.
    pub fn version(&self) -> Option<String> {
        self.version.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Finds the newest API version both sides speak in slurmrestd's OpenAPI description.
    async fn discover(&self) -> Result<String, SlurmError> {
        if let Some(v) = self.version() {
            return Ok(v);
        }
        let doc: Value = self.send(self.http.get(format!("{}/openapi/v3", self.settings.url))).await?;
        let offered: Vec<&str> = doc
            .get("paths")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(path, _)| path.strip_prefix("/slurm/")?.strip_suffix("/ping"))
            .collect();
        let Some(v) = VERSIONS.iter().find(|v| offered.contains(v)) else {
            return Err(SlurmError::Refused(format!(
                "slurmrestd offers {}; sessiond speaks {}",
                if offered.is_empty() { "no known API".to_owned() } else { offered.join(", ") },
                VERSIONS.join(", ")
            )));
        };
        *self.version.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some((*v).to_owned());
        Ok((*v).to_owned())
    }

    async fn path(&self, rest: &str) -> Result<String, SlurmError> {
        Ok(format!("{}/slurm/{}/{rest}", self.settings.url, self.discover().await?))
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<Value, SlurmError> {
        self.send_as::<Value>(request).await
    }

    /// Sends `request` and reads the answer as `T`, straight from its bytes: a list of a
    /// few thousand jobs is megabytes of JSON, of which a look needs a dozen fields each.
    async fn send_as<T: Answer>(&self, request: reqwest::RequestBuilder) -> Result<T, SlurmError> {
        let token = self.settings.token.read().map_err(SlurmError::Refused)?;
        let response = request
            .header("X-SLURM-USER-NAME", &self.settings.user)
            .header("X-SLURM-USER-TOKEN", token)
            .send()
            .await
            .map_err(|e| SlurmError::Unreachable(without_url(e)))?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| SlurmError::Unreachable(without_url(e)))?;
        let answer = serde_json::from_slice::<T>(&bytes);
        let errors = match &answer {
            Ok(a) => slurm_errors(a.errors()),
            // Not what was asked (an error's answer): its errors all the same.
            Err(_) => serde_json::from_slice::<Value>(&bytes).map(|v| slurm_errors(v.errors())).unwrap_or_default(),
        };
        if !status.is_success() || !errors.is_empty() {
            let why = if errors.is_empty() { format!("HTTP {status}") } else { errors.join("; ") };
            return Err(SlurmError::Refused(why));
        }
        answer.map_err(|e| SlurmError::Refused(format!("an unexpected answer: {e}")))
    }

    pub async fn ping(&self) -> Result<(), SlurmError> {
        let url = self.path("ping").await?;
        self.send(self.http.get(url)).await.map(drop)
    }

    pub async fn nodes(&self) -> Result<Vec<Node>, SlurmError> {
        let url = self.path("nodes").await?;
        Ok(self.send_as::<Nodes>(self.http.get(url)).await?.nodes)
    }

    pub async fn jobs(&self) -> Result<Vec<Job>, SlurmError> {
        let url = self.path("jobs").await?;
        Ok(self.send_as::<Jobs>(self.http.get(url)).await?.jobs)
    }

    pub async fn submit(&self, spec: &JobSpec) -> Result<i64, SlurmError> {
        let url = self.path("job/submit").await?;
        let environment: serde_json::Map<String, Value> =
            spec.environment.iter().map(|(k, v)| (k.clone(), Value::from(v.clone()))).collect();
        let mut job = json!({
            "name": spec.name,
            "comment": spec.comment,
            "partition": self.settings.partition,
            // v0.0.38 reads a node count as text (an array is accepted, then ignored).
            "nodes": spec.nodes.to_string(),
            "tasks": spec.tasks,
            "cpus_per_task": spec.cpus_per_task,
            "memory_per_node": spec.memory_per_node_mib,
            "environment": environment,
            "standard_output": spec.output,
            "standard_error": spec.output,
            "current_working_directory": spec.work_dir,
            "requeue": false,
        });
        if spec.gpus_per_node > 0 {
            job["gres"] = Value::from(format!("gpu:{}", spec.gpus_per_node));
        }
        if let Some(minutes) = spec.time_limit_minutes {
            job["time_limit"] = Value::from(minutes);
        }
        let body = self.send(self.http.post(url).json(&json!({ "job": job, "script": spec.script }))).await?;
        body.get("job_id").and_then(Value::as_i64).ok_or_else(|| SlurmError::Refused("no job id".to_owned()))
    }

    /// Sends `signal` (e.g. `SIGTERM`) to the job's processes, or cancels it with none.
    pub async fn kill(&self, job_id: &str, signal: Option<&str>) -> Result<(), SlurmError> {
        let url = self.path(&format!("job/{job_id}")).await?;
        let mut request = self.http.delete(url);
        if let Some(signal) = signal {
            request = request.query(&[("signal", signal)]);
        }
        match self.send(request).await {
            // Already over: nothing to do.
            Err(SlurmError::Refused(why)) if why.contains("already completed") || why.contains("Invalid job id") => {
                Ok(())
            }
            other => other.map(drop),
        }
    }
}

/// A Slurm answer: what was asked, and the errors it lists.
trait Answer: serde::de::DeserializeOwned {
    fn errors(&self) -> &[Value];
}

impl Answer for Value {
    fn errors(&self) -> &[Value] {
        self.get("errors").and_then(Value::as_array).map_or(&[], Vec::as_slice)
    }
}

#[derive(Deserialize)]
struct Nodes {
    #[serde(default)]
    nodes: Vec<Node>,
    #[serde(default)]
    errors: Vec<Value>,
}

impl Answer for Nodes {
    fn errors(&self) -> &[Value] {
        &self.errors
    }
}

#[derive(Deserialize)]
struct Jobs {
    #[serde(default)]
    jobs: Vec<Job>,
    #[serde(default)]
    errors: Vec<Value>,
}

impl Answer for Jobs {
    fn errors(&self) -> &[Value] {
        &self.errors
    }
}

/// The errors a Slurm answer lists.
fn slurm_errors(errors: &[Value]) -> Vec<String> {
    errors
        .iter()
        .filter(|e| e.get("error_number").and_then(Value::as_i64).unwrap_or(1) != 0)
        .map(|e| {
            let text = e.get("error").and_then(Value::as_str).unwrap_or("error");
            let description = e.get("description").and_then(Value::as_str).unwrap_or("");
            if description.is_empty() { text.to_owned() } else { format!("{text} ({description})") }
        })
        .collect()
}

/// A request's error without its URL's query (nothing secret is in it, but it is noise).
fn without_url(e: reqwest::Error) -> String {
    let source = std::error::Error::source(&e).map(|s| format!(": {s}")).unwrap_or_default();
    format!("{}{source}", e.without_url())
}
