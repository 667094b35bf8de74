//! The store conformance suite of `agent-testkit`, against every store: memory,
//! SQLite and PostgreSQL (the throw-away test server).

#![allow(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::sync::Arc;

use agent_core::store::Store;
use agent_store::MemoryStore;
use agent_testkit::conformance::Opener;

mod memory {
    use super::*;

    fn opener() -> Opener {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        Arc::new(move || {
            let store = Arc::clone(&store);
            Box::pin(async move { Some(store) })
        })
    }

    agent_testkit::store_conformance!(opener());
}

mod sqlite {
    use super::*;

    fn opener() -> Opener {
        let path = std::env::temp_dir().join(format!(
            "agent-conformance-{}-{}.db",
            std::process::id(),
            agent_core::id::new_session_id()
        ));
        Arc::new(move || {
            let path = path.clone();
            Box::pin(async move {
                Some(Arc::new(agent_store::SqliteStore::open(&path).unwrap()) as Arc<dyn Store>)
            })
        })
    }

    agent_testkit::store_conformance!(opener());
}

mod postgres {
    use super::*;

    /// A database of the test server of its own, made on first use.
    fn opener() -> Opener {
        let database = Arc::new(tokio::sync::OnceCell::new());
        Arc::new(move || {
            let database = Arc::clone(&database);
            Box::pin(async move {
                let url = agent_testkit::postgres::test_url()?;
                let db = database
                    .get_or_init(|| agent_testkit::postgres::fresh_database(&url))
                    .await;
                Some(agent_store::open_url(db, true).await.unwrap())
            })
        })
    }

    agent_testkit::store_conformance!(opener());
}
