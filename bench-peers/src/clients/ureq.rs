//! ureq 3, driven as its docs show: one `Agent` (its connection pool), a
//! blocking `agent.get(url).call()`, then the body read to the end with
//! `body_mut().read_to_vec()`.
//!
//! ureq has no timeout by default. The timeout case sets `timeout_global`
//! on each request through its per-request config
//! (`agent.get(url).config().timeout_global(Some(d)).build().call()`).
//!
//! ureq is blocking only: there is no future to keep 64 of. The
//! 64-in-flight case runs it the way its users get concurrency, with 64
//! threads sharing one agent; the agent's idle pool is raised from its
//! defaults (3 per host, 10 in all) to the window, or most of the 64
//! connections would be closed and reopened on every round.

use super::Blocking;
use crate::measure::{Plan, Sample};
use std::time::Duration;
use ureq::Agent;

fn agent(pool: Option<usize>) -> Agent {
    let config = Agent::config_builder().proxy(None);
    let config = match pool {
        Some(n) => config
            .max_idle_connections(n)
            .max_idle_connections_per_host(n),
        None => config,
    };
    config.build().into()
}

#[derive(Clone)]
struct Sequential {
    agent: Agent,
    timeout: Option<Duration>,
}

impl Blocking for Sequential {
    fn get(&mut self, url: &str) -> Result<usize, String> {
        let request = self.agent.get(url);
        let result = match self.timeout {
            Some(timeout) => request
                .config()
                .timeout_global(Some(timeout))
                .build()
                .call(),
            None => request.call(),
        };
        let mut response = result.map_err(|e| format!("ureq: {e}"))?;
        if response.status() != 200 {
            return Err(format!("ureq: status {}", response.status()));
        }
        let body = response
            .body_mut()
            .read_to_vec()
            .map_err(|e| format!("ureq: body: {e}"))?;
        Ok(body.len())
    }
}

pub fn blocking(timeout: Option<Duration>) -> Result<Box<dyn Blocking>, String> {
    Ok(Box::new(Sequential {
        agent: agent(None),
        timeout,
    }))
}

pub fn in_flight(url: &str, expect: usize, window: usize, plan: Plan) -> Result<Sample, String> {
    let client = Sequential {
        agent: agent(Some(window)),
        timeout: None,
    };
    crate::drive::threads(client, url, window, expect, plan)
}
