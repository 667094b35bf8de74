//! Leases in groups: the leases taken and given up at one moment — fifty
//! sessions starting and ending at once, say — go to the server in one statement
//! each way instead of one transaction apiece. A lease that cannot be taken this
//! simple way (someone else holds it) is left to the careful path of [`lease`],
//! which looks at the holder.
//!
//! [`lease`]: super::lease

use std::collections::HashSet;
use std::time::Duration;

use deadpool_postgres::Pool;
use tokio::sync::{mpsc, oneshot};

use super::{OPERATION_TIMEOUT, detail};
use crate::process::ProcessIdentity;

/// Most lease operations in one statement.
const MAX_GROUP: usize = 512;

/// Takes every lease in the group that is free, already ours or expired; the
/// sessions it took come back.
pub(super) const TAKE: &str = "
INSERT INTO agent.leases AS l (session_id, owner, host, boot_id, pid, start_ticks, expires_at)
SELECT a.session_id, a.owner, $3, $4, $5, $6, now() + make_interval(secs => a.ttl)
FROM unnest($1::text[], $2::text[], $7::float8[]) AS a(session_id, owner, ttl)
ON CONFLICT (session_id) DO UPDATE SET owner = EXCLUDED.owner, host = EXCLUDED.host,
    boot_id = EXCLUDED.boot_id, pid = EXCLUDED.pid, start_ticks = EXCLUDED.start_ticks,
    expires_at = EXCLUDED.expires_at
WHERE l.owner = EXCLUDED.owner OR l.expires_at <= now()
RETURNING session_id";

/// Gives up every lease of the group that its owner still holds.
pub(super) const GIVE: &str = "
DELETE FROM agent.leases l
USING unnest($1::text[], $2::text[]) AS a(session_id, owner)
WHERE l.session_id = a.session_id AND l.owner = a.owner";

/// One lease operation waiting for the lease writer.
pub(super) enum LeaseOp {
    /// Take a lease if it is free, ours or expired; answers whether it was taken.
    Take {
        session_id: String,
        owner: String,
        ttl: Duration,
        reply: oneshot::Sender<Result<bool, String>>,
    },
    /// Give a lease up.
    Give {
        session_id: String,
        owner: String,
        reply: oneshot::Sender<Result<(), String>>,
    },
}

impl LeaseOp {
    fn session_id(&self) -> &str {
        match self {
            Self::Take { session_id, .. } | Self::Give { session_id, .. } => session_id,
        }
    }

    fn fail(self, message: String) {
        match self {
            Self::Take { reply, .. } => drop(reply.send(Err(message))),
            Self::Give { reply, .. } => drop(reply.send(Err(message))),
        }
    }
}

/// Serves lease operations in groups until every sender is gone. Two operations
/// on one session never share a statement: the second waits for the next group.
pub(super) async fn write_leases(
    pool: Pool,
    mut queue: mpsc::UnboundedReceiver<LeaseOp>,
    me: ProcessIdentity,
) {
    let mut carried: Vec<LeaseOp> = Vec::new();
    loop {
        if carried.is_empty() {
            let Some(first) = queue.recv().await else {
                return;
            };
            carried.push(first);
        }
        while carried.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(op) => carried.push(op),
                Err(_) => break,
            }
        }
        let mut seen = HashSet::new();
        let (group, later): (Vec<LeaseOp>, Vec<LeaseOp>) = std::mem::take(&mut carried)
            .into_iter()
            .partition(|op| seen.insert(op.session_id().to_owned()));
        carried = later;
        serve(&pool, group, &me).await;
    }
}

async fn serve(pool: &Pool, group: Vec<LeaseOp>, me: &ProcessIdentity) {
    let (takes, gives): (Vec<LeaseOp>, Vec<LeaseOp>) = group
        .into_iter()
        .partition(|op| matches!(op, LeaseOp::Take { .. }));
    if !takes.is_empty() {
        take(pool, takes, me).await;
    }
    if !gives.is_empty() {
        give(pool, gives).await;
    }
}

async fn take(pool: &Pool, takes: Vec<LeaseOp>, me: &ProcessIdentity) {
    let (mut sessions, mut owners, mut ttls) = (Vec::new(), Vec::new(), Vec::new());
    for op in &takes {
        if let LeaseOp::Take {
            session_id,
            owner,
            ttl,
            ..
        } = op
        {
            sessions.push(session_id.clone());
            owners.push(owner.clone());
            ttls.push(ttl.as_secs_f64());
        }
    }
    let pid = i64::from(me.pid);
    let ticks = i64::try_from(me.start_ticks).unwrap_or(0);
    let work = async {
        let client = pool.get().await.map_err(|err| err.to_string())?;
        let statement = client
            .prepare_cached(TAKE)
            .await
            .map_err(|err| detail(&err))?;
        let rows = client
            .query(
                &statement,
                &[
                    &sessions,
                    &owners,
                    &me.host,
                    &me.boot_id,
                    &pid,
                    &ticks,
                    &ttls,
                ],
            )
            .await
            .map_err(|err| detail(&err))?;
        Ok::<HashSet<String>, String>(rows.iter().map(|row| row.get(0)).collect())
    };
    match bounded(work).await {
        Ok(taken) => {
            for op in takes {
                if let LeaseOp::Take {
                    session_id, reply, ..
                } = op
                {
                    let _ = reply.send(Ok(taken.contains(&session_id)));
                }
            }
        }
        Err(message) => takes.into_iter().for_each(|op| op.fail(message.clone())),
    }
}

async fn give(pool: &Pool, gives: Vec<LeaseOp>) {
    let (mut sessions, mut owners) = (Vec::new(), Vec::new());
    for op in &gives {
        if let LeaseOp::Give {
            session_id, owner, ..
        } = op
        {
            sessions.push(session_id.clone());
            owners.push(owner.clone());
        }
    }
    let work = async {
        let client = pool.get().await.map_err(|err| err.to_string())?;
        let statement = client
            .prepare_cached(GIVE)
            .await
            .map_err(|err| detail(&err))?;
        client
            .execute(&statement, &[&sessions, &owners])
            .await
            .map(|_| ())
            .map_err(|err| detail(&err))
    };
    match bounded(work).await {
        Ok(()) => {
            for op in gives {
                if let LeaseOp::Give { reply, .. } = op {
                    let _ = reply.send(Ok(()));
                }
            }
        }
        Err(message) => gives.into_iter().for_each(|op| op.fail(message.clone())),
    }
}

async fn bounded<T>(
    work: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, String> {
    tokio::time::timeout(OPERATION_TIMEOUT, work)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {}s", OPERATION_TIMEOUT.as_secs())))
}
