//! Leases on PostgreSQL. Expiry is compared with the server's `now()`, never a
//! client's clock, so holders on machines whose clocks disagree still take turns.
//! A holder's process identity decides only on its own host: a lease held by
//! this host's dead process is taken over at once; elsewhere, expiry decides.
//! The common cases — a free, own or expired lease taken, a lease given up — go
//! through the lease writer in groups; this module handles the rest.

use std::time::Duration;

use agent_core::store::StoreError;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use tokio::sync::oneshot;

use super::lease_writer::LeaseOp;
use super::{PostgresStore, detail};

/// Tries at taking a lease that changes hands meanwhile.
const ATTEMPTS: usize = 3;
use crate::process::{Liveness, ProcessIdentity};

/// How one try at a lease went.
enum Try {
    Taken,
    Refused(StoreError),
    /// The lease changed hands between two statements.
    Again,
}

/// The holder row and how many seconds its lease still runs.
struct Holder {
    owner: String,
    identity: ProcessIdentity,
    seconds_left: f64,
}

impl Holder {
    fn of(row: &Row) -> Self {
        Self {
            owner: row.get(0),
            identity: ProcessIdentity {
                host: row.get(1),
                boot_id: row.get(2),
                pid: u32::try_from(row.get::<_, i64>(3)).unwrap_or(0),
                start_ticks: u64::try_from(row.get::<_, i64>(4)).unwrap_or(0),
            },
            seconds_left: row.get(5),
        }
    }
}

fn seconds(ttl: Duration) -> f64 {
    ttl.as_secs_f64()
}

impl PostgresStore {
    /// Hands `op` to the lease writer and waits for its answer.
    async fn lease_op<T>(
        &self,
        op: impl FnOnce(oneshot::Sender<Result<T, String>>) -> LeaseOp,
    ) -> Result<T, StoreError> {
        let failed = |message: String| {
            StoreError::Backend(
                self.target
                    .scrub(&format!("PostgreSQL at {}: {message}", self.target)),
            )
        };
        let (reply, answer) = oneshot::channel();
        self.leases
            .send(op(reply))
            .map_err(|_| failed("the lease writer stopped".into()))?;
        answer
            .await
            .map_err(|_| failed("the lease writer stopped".into()))?
            .map_err(failed)
    }

    /// Gives up `owner`'s lease, in a group with others given up at that moment.
    pub(super) async fn give_lease(&self, session_id: &str, owner: &str) -> Result<(), StoreError> {
        self.lease_op(|reply| LeaseOp::Give {
            session_id: session_id.to_owned(),
            owner: owner.to_owned(),
            reply,
        })
        .await
    }

    pub(super) async fn take_lease(
        &self,
        session_id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<(), StoreError> {
        if self
            .lease_op(|reply| LeaseOp::Take {
                session_id: session_id.to_owned(),
                owner: owner.to_owned(),
                ttl,
                reply,
            })
            .await?
        {
            return Ok(());
        }
        let me = &self.me;
        let pid = i64::from(me.pid);
        let ticks = i64::try_from(me.start_ticks).unwrap_or(0);
        let ttl = seconds(ttl);
        let params: [&(dyn ToSql + Sync); 7] = [
            &session_id,
            &owner,
            &me.host,
            &me.boot_id,
            &pid,
            &ticks,
            &ttl,
        ];
        for _ in 0..ATTEMPTS {
            match self.try_take(session_id, &params).await? {
                Try::Taken => return Ok(()),
                Try::Refused(refusal) => return Err(refusal),
                Try::Again => {}
            }
        }
        Err(StoreError::Backend(format!(
            "the lease on session `{session_id}` kept changing hands; try again"
        )))
    }

    /// One try: takes the lease when it is free, ours, expired or held by a dead
    /// process of this host; otherwise the refusal naming the holder.
    async fn try_take(
        &self,
        session_id: &str,
        params: &[&(dyn ToSql + Sync); 7],
    ) -> Result<Try, StoreError> {
        let me = &self.me;
        let taken = self
            .query(
                "INSERT INTO agent.leases AS l (session_id, owner, host, boot_id, pid, start_ticks, expires_at)
                 VALUES ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7))
                 ON CONFLICT (session_id) DO UPDATE SET owner = EXCLUDED.owner, host = EXCLUDED.host,
                     boot_id = EXCLUDED.boot_id, pid = EXCLUDED.pid, start_ticks = EXCLUDED.start_ticks,
                     expires_at = EXCLUDED.expires_at
                 WHERE l.owner = EXCLUDED.owner OR l.expires_at <= now()
                 RETURNING 1",
                params,
            )
            .await?;
        if !taken.is_empty() {
            return Ok(Try::Taken);
        }
        let rows = self
            .query(
                "SELECT owner, host, boot_id, pid, start_ticks,
                        EXTRACT(EPOCH FROM expires_at - now())::float8
                 FROM agent.leases WHERE session_id = $1",
                &[&session_id],
            )
            .await?;
        let Some(holder) = rows.first().map(Holder::of) else {
            return Ok(Try::Again);
        };
        if holder.identity.liveness(me) == Liveness::Dead {
            let [id, new_owner, host, boot, pid, ticks, ttl] = *params;
            let stolen = self
                .query(
                    "UPDATE agent.leases SET owner = $2, host = $3, boot_id = $4, pid = $5,
                         start_ticks = $6, expires_at = now() + make_interval(secs => $7)
                     WHERE session_id = $1 AND owner = $8
                     RETURNING 1",
                    &[id, new_owner, host, boot, pid, ticks, ttl, &holder.owner],
                )
                .await?;
            return Ok(if stolen.is_empty() {
                Try::Again
            } else {
                Try::Taken
            });
        }
        Ok(Try::Refused(StoreError::Leased {
            session_id: session_id.to_owned(),
            holder: format!(
                "pid {} on host {} holds its lease (it expires in {}s unless renewed)",
                holder.identity.pid,
                holder.identity.host,
                holder.seconds_left.max(0.0).ceil()
            ),
        }))
    }

    pub(super) async fn extend_lease(
        &self,
        session_id: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<u64, StoreError> {
        let ttl = seconds(ttl);
        let rows = self
            .query(
                "WITH renewed AS (
                     UPDATE agent.leases SET expires_at = now() + make_interval(secs => $3)
                     WHERE session_id = $1 AND owner = $2 RETURNING 1)
                 SELECT EXISTS (SELECT 1 FROM renewed),
                        COALESCE((SELECT last_seq FROM agent.sessions WHERE session_id = $1), 0)",
                &[&session_id, &owner, &ttl],
            )
            .await?;
        let row = rows
            .first()
            .ok_or_else(|| StoreError::Backend("the lease renewal returned no row".into()))?;
        let renewed: bool = row
            .try_get(0)
            .map_err(|err| StoreError::Backend(detail(&err)))?;
        if !renewed {
            return Err(StoreError::LeaseLost(session_id.to_owned()));
        }
        let last: i64 = row
            .try_get(1)
            .map_err(|err| StoreError::Backend(detail(&err)))?;
        Ok(u64::try_from(last).unwrap_or(0))
    }
}
