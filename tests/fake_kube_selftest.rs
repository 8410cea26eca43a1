//! Checks the fake Kubernetes API server against the real kube-rs client, so
//! that end-to-end tests built on it fail because of the code under test and
//! not because the fake speaks the protocol wrongly.

#[path = "common/fake_kube.rs"]
mod fake_kube;

use std::future::Future;
use std::time::Duration;

use fake_kube::{node, FakeKube};
use futures::{Stream, StreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::json;

/// Runs `test` with a kube client configured the way the agent will be: from
/// a kubeconfig file written by the fake.
fn with_client<F, Fut>(fake: &FakeKube, test: F)
where
    F: FnOnce(Client) -> Fut,
    Fut: Future<Output = ()>,
{
    let dir = tempfile::tempdir().expect("temp dir");
    let path = fake.write_kubeconfig(dir.path());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(async {
        let kubeconfig = kube::config::Kubeconfig::read_from(&path).expect("kubeconfig parses");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("kubeconfig loads");
        assert_eq!(config.default_namespace, "default");
        let client = Client::try_from(config).expect("client builds");
        tokio::time::timeout(Duration::from_secs(30), test(client))
            .await
            .expect("the test finishes within 30 s");
    });
}

fn job(name: &str) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": { "name": name, "labels": { "fleetq.io/workload": name } },
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{ "name": "main", "image": "busybox" }],
                },
            },
        },
    }))
    .expect("a valid Job")
}

fn api_error(e: kube::Error) -> Box<kube::core::Status> {
    match e {
        kube::Error::Api(status) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// The next item of `stream`, failing the test after 5 s.
async fn next<S: Stream + Unpin>(stream: &mut S) -> S::Item {
    tokio::time::timeout(Duration::from_secs(5), stream.next())
        .await
        .expect("an event within 5 s")
        .expect("the stream goes on")
}

#[test]
fn a_created_job_reads_back_with_server_set_fields() {
    let fake = &FakeKube::start();
    with_client(fake, |client| async move {
        let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
        let created = jobs
            .create(&PostParams::default(), &job("a"))
            .await
            .expect("create");
        assert_eq!(created.namespace().as_deref(), Some("default"));
        assert!(created.uid().is_some());
        assert!(created.resource_version().is_some());
        assert!(created.metadata.creation_timestamp.is_some());
        assert_eq!(created.metadata.generation, Some(1));

        let read = jobs.get("a").await.expect("get");
        assert_eq!(read.uid(), created.uid());
        assert_eq!(read.resource_version(), created.resource_version());

        let dup = api_error(
            jobs.create(&PostParams::default(), &job("a"))
                .await
                .expect_err("duplicate create fails"),
        );
        assert_eq!(dup.code, 409);
        assert_eq!(dup.reason, "AlreadyExists");
        assert_eq!(dup.message, "jobs.batch \"a\" already exists");

        let missing = api_error(jobs.get("nope").await.expect_err("no such Job"));
        assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));

        let mut elsewhere = job("b");
        elsewhere.metadata.namespace = Some("other".into());
        let mismatch = api_error(
            jobs.create(&PostParams::default(), &elsewhere)
                .await
                .expect_err("namespace mismatch"),
        );
        assert_eq!(
            (mismatch.code, mismatch.reason.as_str()),
            (400, "BadRequest")
        );

        // Listing across namespaces and within one; pages of one item
        // exercise the continue token.
        let other: Api<Job> = Api::namespaced(client.clone(), "other");
        other
            .create(&PostParams::default(), &job("b"))
            .await
            .expect("create in other");
        let all: Api<Job> = Api::all(client.clone());
        let names: Vec<String> = all
            .list(&ListParams::default())
            .await
            .expect("list")
            .iter()
            .map(|j| j.name_any())
            .collect();
        assert_eq!(names, ["a", "b"]);
        let page = all
            .list(&ListParams::default().limit(1))
            .await
            .expect("first page");
        assert_eq!(page.items.len(), 1);
        let token = page.metadata.continue_.clone().expect("a continue token");
        let rest = all
            .list(&ListParams::default().limit(1).continue_token(&token))
            .await
            .expect("second page");
        assert_eq!(rest.items[0].name_any(), "b");
        assert_eq!(
            jobs.list(&ListParams::default())
                .await
                .expect("list")
                .items
                .len(),
            1
        );
    });
    let stored = fake.jobs();
    assert_eq!(stored.len(), 2);
    assert_eq!(stored[0]["metadata"]["namespace"], "default");
    assert_eq!(stored[0]["status"], json!({}));
}

#[test]
fn nodes_are_listed_by_label_and_field_selector() {
    let fake = &FakeKube::start();
    fake.put_node(node(
        "gpu-1",
        &[("fleetq.io/pool", "h100"), ("zone", "a")],
        &[("nvidia.com/gpu", "8"), ("cpu", "96")],
    ));
    fake.put_node(node(
        "gpu-2",
        &[("fleetq.io/pool", "h100")],
        &[("nvidia.com/gpu", "8")],
    ));
    fake.put_node(node(
        "cpu-1",
        &[("fleetq.io/pool", "cpu")],
        &[("cpu", "64")],
    ));
    with_client(fake, |client| async move {
        let nodes: Api<Node> = Api::all(client);
        let names = |list: kube::core::ObjectList<Node>| -> Vec<String> {
            list.iter().map(|n| n.name_any()).collect()
        };
        let select = |labels: &str| ListParams::default().labels(labels);
        let h100 = nodes
            .list(&select("fleetq.io/pool=h100"))
            .await
            .expect("list");
        assert_eq!(names(h100), ["gpu-1", "gpu-2"]);
        let not_h100 = nodes
            .list(&select("fleetq.io/pool!=h100"))
            .await
            .expect("list");
        assert_eq!(names(not_h100), ["cpu-1"]);
        let zoned = nodes
            .list(&select("zone,fleetq.io/pool in (h100, a100)"))
            .await
            .expect("list");
        assert_eq!(names(zoned), ["gpu-1"]);
        let by_name = nodes
            .list(&ListParams::default().fields("metadata.name=gpu-2"))
            .await
            .expect("list");
        assert_eq!(names(by_name), ["gpu-2"]);
        let bad = api_error(
            nodes
                .list(&ListParams::default().fields("status.phase=Ready"))
                .await
                .expect_err("unsupported field"),
        );
        assert_eq!(bad.code, 400);

        let gpu1 = nodes.get("gpu-1").await.expect("get");
        let status = gpu1.status.expect("status");
        assert_eq!(
            status.allocatable.expect("allocatable")["nvidia.com/gpu"].0,
            "8"
        );
        let ready = &status.conditions.expect("conditions")[0];
        assert_eq!(
            (ready.type_.as_str(), ready.status.as_str()),
            ("Ready", "True")
        );
        assert_ne!(gpu1.spec.and_then(|s| s.unschedulable), Some(true));
    });
}

#[test]
fn a_watcher_follows_a_job_until_its_foreground_deletion() {
    let fake = &FakeKube::start();
    with_client(fake, |client| async move {
        let jobs: Api<Job> = Api::namespaced(client, "default");
        // Created before the watcher starts, so it arrives in the initial
        // list; "b" arrives over the watch.
        jobs.create(&PostParams::default(), &job("a"))
            .await
            .expect("create a");
        let mut events = watcher(jobs.clone(), watcher::Config::default()).boxed();
        assert!(matches!(next(&mut events).await, Ok(watcher::Event::Init)));
        match next(&mut events).await {
            Ok(watcher::Event::InitApply(j)) => assert_eq!(j.name_any(), "a"),
            other => panic!("expected InitApply(a), got {other:?}"),
        }
        assert!(matches!(
            next(&mut events).await,
            Ok(watcher::Event::InitDone)
        ));

        jobs.create(&PostParams::default(), &job("b"))
            .await
            .expect("create b");
        match next(&mut events).await {
            Ok(watcher::Event::Apply(j)) => {
                assert_eq!(j.name_any(), "b");
                assert_eq!(j.status.and_then(|s| s.active), None);
            }
            other => panic!("expected Apply(b), got {other:?}"),
        }

        fake.set_job_status("default", "b", json!({ "active": 1 }));
        match next(&mut events).await {
            Ok(watcher::Event::Apply(j)) => {
                assert_eq!(j.name_any(), "b");
                assert_eq!(j.status.and_then(|s| s.active), Some(1));
            }
            other => panic!("expected Apply(b) with status, got {other:?}"),
        }

        let answer = jobs
            .delete("b", &DeleteParams::foreground())
            .await
            .expect("delete");
        let terminating = answer.left().expect("a foreground delete returns the Job");
        assert!(terminating.metadata.deletion_timestamp.is_some());
        assert_eq!(terminating.finalizers(), ["foregroundDeletion"]);
        match next(&mut events).await {
            Ok(watcher::Event::Apply(j)) => assert!(j.metadata.deletion_timestamp.is_some()),
            other => panic!("expected the terminating Apply(b), got {other:?}"),
        }
        match next(&mut events).await {
            Ok(watcher::Event::Delete(j)) => assert_eq!(j.name_any(), "b"),
            other => panic!("expected Delete(b), got {other:?}"),
        }
        let gone = api_error(jobs.get("b").await.expect_err("b is gone"));
        assert_eq!(gone.code, 404);

        // A background delete is immediate and answers with a Status.
        let answer = jobs
            .delete("a", &DeleteParams::background())
            .await
            .expect("delete");
        assert!(answer.is_right(), "{answer:?}");
        match next(&mut events).await {
            Ok(watcher::Event::Delete(j)) => assert_eq!(j.name_any(), "a"),
            other => panic!("expected Delete(a), got {other:?}"),
        }
        let missing = api_error(
            jobs.delete("a", &DeleteParams::default())
                .await
                .expect_err("a is gone"),
        );
        assert_eq!(missing.code, 404);
    });
    let deletes = fake.deletes();
    assert_eq!(deletes.len(), 3, "{deletes:?}");
    assert_eq!(
        (deletes[0].0.as_str(), deletes[0].1.as_str()),
        ("default", "b")
    );
    assert_eq!(deletes[0].2["propagationPolicy"], "Foreground");
    assert_eq!(deletes[1].2["propagationPolicy"], "Background");
    assert!(fake.jobs().is_empty());
}

#[test]
fn a_streaming_list_watcher_gets_its_initial_state() {
    let fake = &FakeKube::start();
    fake.put_node(node("n1", &[("pool", "a")], &[("cpu", "4")]));
    fake.put_node(node("n2", &[("pool", "b")], &[("cpu", "4")]));
    with_client(fake, |client| async move {
        let nodes: Api<Node> = Api::all(client);
        let config = watcher::Config::default()
            .streaming_lists()
            .labels("pool=a");
        let mut events = watcher(nodes, config).boxed();
        assert!(matches!(next(&mut events).await, Ok(watcher::Event::Init)));
        match next(&mut events).await {
            Ok(watcher::Event::InitApply(n)) => assert_eq!(n.name_any(), "n1"),
            other => panic!("expected InitApply(n1), got {other:?}"),
        }
        assert!(matches!(
            next(&mut events).await,
            Ok(watcher::Event::InitDone)
        ));
        fake.put_node(node("n3", &[("pool", "a")], &[("cpu", "4")]));
        fake.put_node(node("n4", &[("pool", "b")], &[("cpu", "4")]));
        fake.put_node(node("n1", &[("pool", "a")], &[("cpu", "8")]));
        match next(&mut events).await {
            Ok(watcher::Event::Apply(n)) => assert_eq!(n.name_any(), "n3"),
            other => panic!("expected Apply(n3), got {other:?}"),
        }
        match next(&mut events).await {
            Ok(watcher::Event::Apply(n)) => {
                assert_eq!(n.name_any(), "n1");
                let cpu = &n.status.and_then(|s| s.allocatable).expect("allocatable")["cpu"];
                assert_eq!(cpu.0, "8");
            }
            other => panic!("expected Apply(n1), got {other:?}"),
        }
    });
}

#[test]
fn a_watch_replays_from_a_resource_version_and_times_out() {
    let fake = &FakeKube::start();
    fake.put_node(node("n1", &[], &[]));
    with_client(fake, |client| async move {
        let nodes: Api<Node> = Api::all(client);
        let rv = nodes
            .list(&ListParams::default())
            .await
            .expect("list")
            .metadata
            .resource_version
            .expect("a list resourceVersion");
        fake.put_node(node("n2", &[], &[]));
        fake.put_node(node("n1", &[("changed", "yes")], &[]));

        let stream = nodes
            .watch(&WatchParams::default().timeout(1), &rv)
            .await
            .expect("watch");
        let events: Vec<_> = stream.collect().await;
        let seen: Vec<(String, String)> = events
            .into_iter()
            .map(|e| match e.expect("a watch event") {
                WatchEvent::Added(n) => ("ADDED".into(), n.name_any()),
                WatchEvent::Modified(n) => ("MODIFIED".into(), n.name_any()),
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("ADDED".into(), "n2".into()),
                ("MODIFIED".into(), "n1".into())
            ]
        );
    });
}

#[test]
fn bad_requests_get_status_answers() {
    let fake = &FakeKube::start();
    with_client(fake, |client| async move {
        let raw = |method: &str, uri: &str, body: &str| {
            hyper::Request::builder()
                .method(method)
                .uri(uri)
                .header("content-type", "application/json")
                .body(body.as_bytes().to_vec())
                .expect("request")
        };
        let cases = [
            (
                "POST",
                "/apis/batch/v1/namespaces/default/jobs",
                "{not json",
                400,
            ),
            ("POST", "/apis/batch/v1/namespaces/default/jobs", "[1]", 400),
            (
                "POST",
                "/apis/batch/v1/namespaces/default/jobs",
                r#"{"metadata":7}"#,
                400,
            ),
            (
                "POST",
                "/apis/batch/v1/namespaces/default/jobs",
                r#"{"kind":"Pod"}"#,
                400,
            ),
            ("POST", "/apis/batch/v1/namespaces/default/jobs", "{}", 422),
            (
                "DELETE",
                "/apis/batch/v1/namespaces/default/jobs/x",
                "{oops",
                400,
            ),
            ("GET", "/api/v1/nodes?labelSelector=a%20b%20c", "", 400),
            (
                "GET",
                "/api/v1/nodes?watch=true&resourceVersion=abc",
                "",
                400,
            ),
            ("GET", "/api/v1/nodes?limit=%ZZ", "", 400),
            ("GET", "/api/v1/pods", "", 404),
            ("PATCH", "/api/v1/nodes/n1", "{}", 405),
        ];
        for (method, uri, body, code) in cases {
            let status = api_error(
                client
                    .request_text(raw(method, uri, body))
                    .await
                    .expect_err(uri),
            );
            assert_eq!(status.code, code, "{method} {uri} {body}: {status:?}");
            assert!(!status.message.is_empty());
        }
        let version = client.apiserver_version().await.expect("version");
        assert_eq!(
            (version.major.as_str(), version.minor.as_str()),
            ("1", "33")
        );

        // A generateName gets a name, and dryRun stores nothing.
        let jobs: Api<Job> = Api::default_namespaced(client);
        let mut generated = job("");
        generated.metadata.name = None;
        generated.metadata.generate_name = Some("gen-".into());
        let dry = jobs
            .create(
                &PostParams {
                    dry_run: true,
                    ..Default::default()
                },
                &generated,
            )
            .await
            .expect("dry run");
        assert!(dry.name_any().starts_with("gen-"));
        assert!(jobs
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .is_empty());
        let made = jobs
            .create(&PostParams::default(), &generated)
            .await
            .expect("create");
        assert_eq!(made.name_any().len(), "gen-".len() + 5);
    });
}
