//! Checks the fake Kubernetes API server against the real kube-rs client, so
//! that end-to-end tests built on it fail because of the code under test and
//! not because the fake speaks the protocol wrongly.

#[path = "common/fake_kube.rs"]
mod fake_kube;

use std::future::Future;
use std::time::Duration;

use fake_kube::{node, pod, FakeKube, Options};
use futures::{Stream, StreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{
    Api, DeleteParams, ListParams, LogParams, Patch, PatchParams, PostParams, VersionMatch,
    WatchEvent, WatchParams,
};
use kube::runtime::{reflector, watcher};
use kube::{Client, ResourceExt};
use serde_json::{json, Value};

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

        // A create in a namespace that does not exist is refused by the
        // NamespaceLifecycle admission plugin: 404 with the namespace named
        // (Namespaces: "namespaces \"x\" not found").
        let other: Api<Job> = Api::namespaced(client.clone(), "other");
        let no_namespace = api_error(
            other
                .create(&PostParams::default(), &job("b"))
                .await
                .expect_err("no namespace other"),
        );
        assert_eq!(
            (no_namespace.code, no_namespace.reason.as_str()),
            (404, "NotFound")
        );
        assert_eq!(no_namespace.message, "namespaces \"other\" not found");
        let details = no_namespace.details.expect("details");
        assert_eq!(
            (details.kind.as_str(), details.name.as_str()),
            ("namespaces", "other")
        );
        fake.put_namespace("other");

        // Listing across namespaces and within one; pages of one item
        // exercise the continue token.
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
            ("GET", "/api/v1/services", "", 404),
            ("PATCH", "/api/v1/nodes/n1", "{}", 405),
            // JSON patch (and apply) are not served: 415.
            (
                "PATCH",
                "/apis/batch/v1/namespaces/default/jobs/x",
                "[]",
                415,
            ),
            // A field of the wrong type fails decoding (400), before any
            // validation.
            (
                "POST",
                "/apis/batch/v1/namespaces/default/jobs",
                r#"{"metadata":{"name":"x"},"spec":{"parallelism":"many"}}"#,
                400,
            ),
            (
                "POST",
                "/apis/batch/v1/namespaces/default/jobs",
                r#"{"metadata":{"name":"x"},"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"m","image":"i","resources":{"limits":{"cpu":"lots"}}}]}}}}"#,
                400,
            ),
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

// ---------------------------------------------------------------------------
// What the API server refuses
// ---------------------------------------------------------------------------

/// A Job like [`job`] whose one container has these requests and limits.
fn job_with_resources(name: &str, requests: Value, limits: Value) -> Value {
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": { "name": name },
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "main",
                        "image": "busybox",
                        "resources": { "requests": requests, "limits": limits },
                    }],
                },
            },
        },
    })
}

/// Creates `job` (raw JSON, so that what the typed client would not let
/// through can be sent) and returns the refusal.
async fn refused(jobs: &Api<Job>, job: Value) -> Box<kube::core::Status> {
    let name = job["metadata"]["name"].clone();
    let job: Job = serde_json::from_value(job).expect("a Job the client can send");
    match jobs.create(&PostParams::default(), &job).await {
        Ok(_) => panic!("{name} was accepted"),
        Err(e) => api_error(e),
    }
}

/// The (field, message) of every cause of a 422.
fn causes(status: &kube::core::Status) -> Vec<(String, String)> {
    status
        .details
        .iter()
        .flat_map(|d| d.causes.iter())
        .map(|c| (c.field.clone(), c.message.clone()))
        .collect()
}

/// Asserts a 422 Invalid whose causes include `field` with a message
/// containing `says`, and whose message names the field too.
fn assert_invalid(status: &kube::core::Status, field: &str, says: &str) {
    assert_eq!(
        (status.code, status.reason.as_str()),
        (422, "Invalid"),
        "{status:?}"
    );
    let all = causes(status);
    assert!(
        all.iter().any(|(f, m)| f == field && m.contains(says)),
        "no cause {field}: ...{says}... in {all:#?}"
    );
    assert!(
        status.message.contains(&format!("{field}: ")),
        "{}",
        status.message
    );
}

/// Container resources, as ValidateResourceRequirements checks them
/// (Resource Management for Pods and Containers: "Extended resources":
/// only whole numbers, never overcommitted, so a request needs an equal
/// limit; a resource name without a domain must be one of Kubernetes' own).
#[test]
fn container_resources_are_validated_like_the_api_server_does() {
    let fake = &FakeKube::start();
    with_client(fake, |client| async move {
        let jobs: Api<Job> = Api::default_namespaced(client);
        let containers = "spec.template.spec.containers[0].resources";

        // fleetq's own gpu.memory is no Kubernetes resource.
        let e = refused(
            &jobs,
            job_with_resources(
                "mem",
                json!({"gpu.memory": "80", "nvidia.com/gpu": "1"}),
                json!({"nvidia.com/gpu": "1"}),
            ),
        )
        .await;
        let field = format!("{containers}.requests[gpu.memory]");
        assert_invalid(&e, &field, "must be a standard resource for containers");
        assert!(
            e.message.starts_with("Job.batch \"mem\" is invalid: "),
            "{}",
            e.message
        );
        assert_eq!(e.details.as_ref().map(|d| d.kind.as_str()), Some("Job"));

        // An extended resource requested without a limit.
        let e = refused(
            &jobs,
            job_with_resources("nolimit", json!({"nvidia.com/gpu": "4"}), json!({})),
        )
        .await;
        assert_invalid(
            &e,
            &format!("{containers}.limits"),
            "Required value: Limit must be set for non overcommitable resources",
        );

        // ...with a request other than its limit.
        let e = refused(
            &jobs,
            job_with_resources(
                "unequal",
                json!({"nvidia.com/gpu": "2"}),
                json!({"nvidia.com/gpu": "4"}),
            ),
        )
        .await;
        assert_invalid(
            &e,
            &format!("{containers}.requests"),
            "Invalid value: \"2\": must be equal to nvidia.com/gpu limit of 4",
        );

        // ...not a whole number.
        let e = refused(
            &jobs,
            job_with_resources("half", json!({}), json!({"nvidia.com/gpu": "500m"})),
        )
        .await;
        assert_invalid(
            &e,
            &format!("{containers}.limits[nvidia.com/gpu]"),
            "Invalid value: \"500m\": must be an integer",
        );

        // A bare name that is not a standard container resource, and a
        // name that is no qualified name.
        let e = refused(
            &jobs,
            job_with_resources("gpu", json!({}), json!({"gpu": "1", "a/b/c": "1"})),
        )
        .await;
        assert_invalid(
            &e,
            &format!("{containers}.limits[gpu]"),
            "must be a standard resource for containers",
        );
        assert_invalid(
            &e,
            &format!("{containers}.limits[a/b/c]"),
            "a qualified name must consist of",
        );

        // What a real server takes: a limit alone, equal amounts written
        // differently, native resources requested below their limit or
        // without one.
        for (name, requests, limits) in [
            ("limit-only", json!({}), json!({"nvidia.com/gpu": "4"})),
            (
                "same-amount",
                json!({"nvidia.com/gpu": "4000m", "nvidia.com/mig-1g.10gb": "1"}),
                json!({"nvidia.com/gpu": "4", "nvidia.com/mig-1g.10gb": "1"}),
            ),
            (
                "native",
                json!({"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "1G"}),
                json!({"memory": "2Gi"}),
            ),
        ] {
            let job: Job =
                serde_json::from_value(job_with_resources(name, requests, limits)).expect("a Job");
            jobs.create(&PostParams::default(), &job)
                .await
                .unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    });
    assert!(fake
        .refusals()
        .iter()
        .all(|(method, _, code, _)| method == "POST" && *code == 422));
    assert_eq!(fake.refusals().len(), 5);
}

/// Object names, labels and annotations (Object Names and IDs: DNS
/// subdomain names; Labels and Selectors: "Syntax and character set";
/// Annotations: at most 256 KiB together), restart policy and node
/// affinity of a Job's pods (Jobs: "Pod Template"; Assigning Pods to
/// Nodes: "Node affinity").
#[test]
fn names_labels_annotations_and_pod_template_are_validated() {
    let fake = &FakeKube::start();
    with_client(fake, |client| async move {
        let jobs: Api<Job> = Api::default_namespaced(client);
        let with = |patch: Value| {
            let mut j = serde_json::to_value(job("ok")).expect("json");
            merge(&mut j, &patch);
            j
        };

        let e = refused(&jobs, with(json!({"metadata": {"name": "Train_LLaMA"}}))).await;
        assert_invalid(&e, "metadata.name", "a lowercase RFC 1123 subdomain");

        // A Job name of 64 characters is a valid subdomain, but the
        // job-name label the server puts on its pods is not a valid label
        // value: real clusters refuse such a Job.
        let long = "a".repeat(64);
        let e = refused(&jobs, with(json!({"metadata": {"name": long}}))).await;
        assert_invalid(
            &e,
            "spec.template.metadata.labels",
            "must be no more than 63 characters",
        );

        let e = refused(
            &jobs,
            with(json!({"metadata": {"labels": {
                "fleetq.dev/workload": "has space",
                "a/b/c": "x",
                "fleetq.dev/cluster": "x".repeat(64),
            }}})),
        )
        .await;
        assert_invalid(&e, "metadata.labels", "Invalid value: \"has space\"");
        assert_invalid(&e, "metadata.labels", "Invalid value: \"a/b/c\"");
        assert_invalid(&e, "metadata.labels", "must be no more than 63 characters");

        let e = refused(
            &jobs,
            with(json!({"metadata": {"annotations": {"big": "x".repeat(256 * 1024)}}})),
        )
        .await;
        assert_invalid(
            &e,
            "metadata.annotations",
            "Too long: may not be more than 262144 bytes",
        );

        let e = refused(
            &jobs,
            with(json!({"spec": {"template": {"spec": {"restartPolicy": "Always"}}}})),
        )
        .await;
        assert_invalid(
            &e,
            "spec.template.spec.restartPolicy",
            "Unsupported value: \"Always\"",
        );

        let affinity = "spec.template.spec.affinity.nodeAffinity.\
                        requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
        let e = refused(
            &jobs,
            with(
                json!({"spec": {"template": {"spec": {"affinity": {"nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
                        "matchExpressions": [
                            {"key": "nvidia.com/gpu.product", "operator": "In", "values": []},
                            {"key": "nvidia.com/gpu.product", "operator": "In",
                             "values": ["NVIDIA H100 80GB HBM3"]},
                        ]
                    }]}
                }}}}}}),
            ),
        )
        .await;
        assert_invalid(
            &e,
            &format!("{affinity}[0].matchExpressions[0].values"),
            "must be specified when `operator` is 'In' or 'NotIn'",
        );
        assert_invalid(
            &e,
            &format!("{affinity}[0].matchExpressions[1].values[0]"),
            "a valid label must be an empty string",
        );

        // Node field selectors: metadata.name only, one value each.
        let e = refused(
            &jobs,
            with(
                json!({"spec": {"template": {"spec": {"affinity": {"nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["a", "b"]},
                            {"key": "spec.unschedulable", "operator": "In", "values": ["x"]},
                        ]
                    }]}
                }}}}}}),
            ),
        )
        .await;
        assert_invalid(
            &e,
            &format!("{affinity}[0].matchFields[0].values"),
            "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
        );
        assert_invalid(
            &e,
            &format!("{affinity}[0].matchFields[1].key"),
            "Unsupported value: \"spec.unschedulable\"",
        );

        // Several errors are listed together, as errors.NewInvalid does.
        let e = refused(
            &jobs,
            with(
                json!({"metadata": {"name": "Bad"}, "spec": {"template": {"spec": {
                "restartPolicy": "Always"}}}}),
            ),
        )
        .await;
        assert!(e.message.contains(": [metadata.name: "), "{}", e.message);
        assert_eq!(causes(&e).len(), 2, "{e:?}");
    });
}

fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                merge(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (t, p) => *t = p.clone(),
    }
}

/// A Job's selector is generated on create, and its selector and pod
/// template cannot change afterwards (Jobs: "Specifying your own Pod
/// selector"; batch/v1 JobSpec: "template ... immutable"; "Mutable
/// Scheduling Directives" for a suspended Job that never started).
#[test]
fn a_jobs_selector_and_template_are_immutable() {
    let fake = &FakeKube::start();
    with_client(fake, |client| async move {
        let jobs: Api<Job> = Api::default_namespaced(client);
        let created = jobs
            .create(&PostParams::default(), &job("a"))
            .await
            .expect("create");
        let uid = created.uid().expect("uid");
        let v = serde_json::to_value(&created).expect("json");
        assert_eq!(
            v["spec"]["selector"],
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
        );
        let labels = &v["spec"]["template"]["metadata"]["labels"];
        assert_eq!(labels["batch.kubernetes.io/job-name"], "a");
        assert_eq!(labels["controller-uid"], json!(uid));
        assert_eq!(
            (
                v["spec"]["parallelism"].as_i64(),
                v["spec"]["completions"].as_i64()
            ),
            (Some(1), Some(1))
        );
        assert_eq!(v["spec"]["backoffLimit"], 6);
        // The Job's labels default to its template's when it has none.
        assert_eq!(v["metadata"]["labels"]["fleetq.io/workload"], "a");

        // Update (PUT) with another image: the template is immutable.
        let mut changed = created.clone();
        changed
            .spec
            .as_mut()
            .and_then(|s| s.template.spec.as_mut())
            .expect("pod spec")
            .containers[0]
            .image = Some("busybox:2".into());
        let e = api_error(
            jobs.replace("a", &PostParams::default(), &changed)
                .await
                .expect_err("template is immutable"),
        );
        assert_invalid(&e, "spec.template", "field is immutable");

        // A merge patch of the selector: immutable too.
        let e = api_error(
            jobs.patch(
                "a",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"selector": {"matchLabels": {"x": "y"}}}})),
            )
            .await
            .expect_err("selector is immutable"),
        );
        assert_invalid(&e, "spec.selector", "field is immutable");

        // Mutable fields change, and the generation follows the spec.
        let patched = jobs
            .patch(
                "a",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"spec": {"parallelism": 0}, "metadata": {"labels": {"l": "v"}}}),
                ),
            )
            .await
            .expect("parallelism is mutable");
        assert_eq!(patched.spec.as_ref().and_then(|s| s.parallelism), Some(0));
        assert_eq!(patched.metadata.generation, Some(2));

        // A stale resourceVersion is a conflict.
        let mut stale = created.clone();
        stale.metadata.labels = Some([("l".to_string(), "w".to_string())].into());
        let e = api_error(
            jobs.replace("a", &PostParams::default(), &stale)
                .await
                .expect_err("stale"),
        );
        assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));

        // A suspended Job that never started may still move its pods.
        let mut suspended = job("s");
        suspended.spec.as_mut().expect("spec").suspend = Some(true);
        jobs.create(&PostParams::default(), &suspended)
            .await
            .expect("create s");
        jobs.patch(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"nodeSelector": {"pool": "b"}}}}})),
        )
        .await
        .expect("scheduling directives of a suspended Job are mutable");
        let e = api_error(
            jobs.patch(
                "s",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"spec": {"template": {"spec": {"restartPolicy": "OnFailure"}}}}),
                ),
            )
            .await
            .expect_err("the rest is not"),
        );
        assert_invalid(&e, "spec.template", "field is immutable");

        // A selector copied from another Job (without manualSelector) is not
        // the generated one: refused, which is why an executor drops it.
        let mut copied = serde_json::to_value(job("copy")).expect("json");
        copied["spec"]["selector"] =
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "old-uid"}});
        let e = refused(&jobs, copied).await;
        assert_invalid(&e, "spec.selector", "`selector` not auto-generated");
    });
}

// ---------------------------------------------------------------------------
// History, selectors and controllers
// ---------------------------------------------------------------------------

/// API concepts, "Efficient detection of changes": a watch from a
/// resourceVersion the server no longer has history for fails with 410
/// Gone (a Status of reason Expired, sent as an ERROR event by the watch
/// cache); "Resource versions": an exact list, or a continue token, that
/// old is 410 too. Within the history an exact list is the state then.
#[test]
fn old_resource_versions_are_gone() {
    let fake = &FakeKube::start_with(Options {
        event_window: 3,
        ..Options::default()
    });
    fake.put_node(node("n1", &[], &[]));
    fake.put_node(node("n2", &[], &[]));
    with_client(fake, |client| async move {
        let nodes: Api<Node> = Api::all(client);
        let first = nodes.list(&ListParams::default()).await.expect("list");
        let rv = first.metadata.resource_version.clone().expect("rv");
        fake.put_node(node("n1", &[("changed", "yes")], &[]));

        // Exact, within the window: n1 without its new label.
        let exact = nodes
            .list(&ListParams::default().at(&rv).matching(VersionMatch::Exact))
            .await
            .expect("exact list");
        assert_eq!(
            exact.metadata.resource_version.as_deref(),
            Some(rv.as_str())
        );
        let n1 = exact
            .items
            .iter()
            .find(|n| n.name_any() == "n1")
            .expect("n1");
        assert!(n1.labels().get("changed").is_none());

        let page = nodes
            .list(&ListParams::default().limit(1))
            .await
            .expect("page");
        let token = page.metadata.continue_.clone().expect("token");
        for i in 3..=6 {
            fake.put_node(node(&format!("n{i}"), &[], &[]));
        }

        let mut stream = nodes
            .watch(&WatchParams::default().timeout(5), &rv)
            .await
            .expect("the watch starts (200)")
            .boxed();
        match next(&mut stream).await.expect("an event") {
            WatchEvent::Error(status) => {
                assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
                assert!(status.message.starts_with("too old resource version"));
            }
            other => panic!("expected a 410 ERROR event, got {other:?}"),
        }
        assert!(stream.next().await.is_none(), "the watch ends after it");

        let gone = api_error(
            nodes
                .list(&ListParams::default().at(&rv).matching(VersionMatch::Exact))
                .await
                .expect_err("too old"),
        );
        assert_eq!((gone.code, gone.reason.as_str()), (410, "Expired"));
        let gone = api_error(
            nodes
                .list(&ListParams::default().limit(1).continue_token(&token))
                .await
                .expect_err("expired continue"),
        );
        assert_eq!((gone.code, gone.reason.as_str()), (410, "Expired"));

        // compact() forgets everything: the latest version still works.
        fake.compact();
        let latest = nodes.list(&ListParams::default()).await.expect("list");
        let now = latest.metadata.resource_version.expect("rv");
        let mut quiet = nodes
            .watch(&WatchParams::default().timeout(1), &now)
            .await
            .expect("watch")
            .boxed();
        assert!(quiet.next().await.is_none(), "no events, no error");
    });
}

/// kube's watcher re-lists after a 410 (kube::runtime::watcher: an ERROR
/// event with code 410 resets it to a fresh list), which is the path an
/// agent takes after an API server restart when history has moved on.
#[test]
fn a_watcher_relists_after_410_and_its_store_drops_what_went() {
    let fake = &FakeKube::start_with(Options {
        event_window: 4,
        ..Options::default()
    });
    with_client(fake, |client| async move {
        let jobs: Api<Job> = Api::default_namespaced(client);
        for name in ["a", "b"] {
            jobs.create(&PostParams::default(), &job(name))
                .await
                .expect("create");
        }
        let (reader, writer) = reflector::store::<Job>();
        let mut events =
            reflector(writer, watcher(jobs.clone(), watcher::Config::default())).boxed();
        loop {
            if let Ok(watcher::Event::InitDone) = next(&mut events).await {
                break;
            }
        }
        let names = |reader: &reflector::Store<Job>| {
            let mut n: Vec<String> = reader.state().iter().map(|j| j.name_any()).collect();
            n.sort();
            n
        };
        assert_eq!(names(&reader), ["a", "b"]);

        fake.pause_watches();
        jobs.delete("a", &DeleteParams::background())
            .await
            .expect("delete a");
        for name in ["c", "d", "e", "f", "g"] {
            jobs.create(&PostParams::default(), &job(name))
                .await
                .expect("create");
        }
        fake.resume_watches();

        let mut saw_gone = false;
        loop {
            match next(&mut events).await {
                Err(watcher::Error::WatchError(status)) if status.code == 410 => saw_gone = true,
                Ok(watcher::Event::InitDone) => break,
                Ok(watcher::Event::Apply(j) | watcher::Event::Delete(j)) => {
                    panic!(
                        "a live event for {} after the history was lost",
                        j.name_any()
                    )
                }
                _ => {}
            }
        }
        assert!(saw_gone, "the reconnect got 410");
        assert_eq!(names(&reader), ["b", "c", "d", "e", "f", "g"]);
    });
}

/// A watch with a selector sees an object that stops matching as DELETED
/// and one that starts to match as ADDED (the watch cache compares the
/// object before and after each change: apiserver's cacheWatcher
/// convertToWatchEvent), for label and field selectors alike; pods are
/// selected by spec.nodeName and status.phase, as kubectl describe node
/// does for the pods that hold a node's resources.
#[test]
fn selector_watches_see_objects_enter_and_leave() {
    let fake = &FakeKube::start();
    fake.put_node(node("n1", &[("pool", "a")], &[]));
    fake.put_pod(pod("default", "p1", "n1", &[], &[("nvidia.com/gpu", "4")]));
    let mut finished = pod("default", "p2", "n1", &[], &[]);
    finished["status"]["phase"] = json!("Succeeded");
    fake.put_pod(finished);
    fake.put_pod(pod("default", "elsewhere", "n2", &[], &[]));
    with_client(fake, |client| async move {
        let pods: Api<Pod> = Api::all(client.clone());
        let holding = "spec.nodeName=n1,status.phase!=Succeeded,status.phase!=Failed";
        let listed = pods
            .list(&ListParams::default().fields(holding))
            .await
            .expect("list");
        let names: Vec<String> = listed.iter().map(|p| p.name_any()).collect();
        assert_eq!(names, ["p1"]);
        // Requests default from limits on a Pod.
        let requests = listed.items[0].spec.as_ref().expect("spec").containers[0]
            .resources
            .as_ref()
            .and_then(|r| r.requests.clone())
            .expect("requests");
        assert_eq!(requests["nvidia.com/gpu"].0, "4");
        let bad = api_error(
            pods.list(&ListParams::default().fields("spec.nodeSelector=x"))
                .await
                .expect_err("unsupported field"),
        );
        assert_eq!(bad.code, 400);

        let rv = listed.metadata.resource_version.expect("rv");
        let mut stream = pods
            .watch(&WatchParams::default().fields(holding).timeout(5), &rv)
            .await
            .expect("watch")
            .boxed();
        fake.set_pod_phase("default", "p1", "Succeeded");
        fake.set_pod_phase("default", "p2", "Running");
        fake.set_pod_phase("default", "elsewhere", "Failed");
        match next(&mut stream).await.expect("event") {
            WatchEvent::Deleted(p) => {
                assert_eq!(p.name_any(), "p1");
                // The object as it was, at the change's resourceVersion.
                let phase = p.status.and_then(|s| s.phase);
                assert_eq!(phase.as_deref(), Some("Running"));
            }
            other => panic!("expected DELETED p1, got {other:?}"),
        }
        match next(&mut stream).await.expect("event") {
            WatchEvent::Added(p) => assert_eq!(p.name_any(), "p2"),
            other => panic!("expected ADDED p2, got {other:?}"),
        }

        let nodes: Api<Node> = Api::all(client);
        let rv = nodes
            .list(&ListParams::default())
            .await
            .expect("list")
            .metadata
            .resource_version
            .expect("rv");
        let mut stream = nodes
            .watch(&WatchParams::default().labels("pool=a").timeout(5), &rv)
            .await
            .expect("watch")
            .boxed();
        fake.put_node(node("n1", &[("pool", "b")], &[]));
        fake.put_node(node("n1", &[("pool", "a")], &[]));
        assert!(matches!(
            next(&mut stream).await,
            Ok(WatchEvent::Deleted(_))
        ));
        assert!(matches!(next(&mut stream).await, Ok(WatchEvent::Added(_))));

        // A created Pod is validated like a Job's pods.
        let bad: Pod =
            serde_json::from_value(pod("default", "bad", "n1", &[], &[("gpu.memory", "80")]))
                .expect("a pod");
        let e = api_error(
            Api::<Pod>::default_namespaced(pods.into_client())
                .create(&PostParams::default(), &bad)
                .await
                .expect_err("refused"),
        );
        assert_invalid(
            &e,
            "spec.containers[0].resources.limits[gpu.memory]",
            "must be a standard resource for containers",
        );
    });
}

/// Automatic Cleanup for Finished Jobs: the TTL-after-finished controller
/// deletes a Job (and so its pods) ttlSecondsAfterFinished after it
/// finished; a Job without one stays.
#[test]
fn a_finished_job_is_deleted_after_its_ttl() {
    let fake = &FakeKube::start();
    fake.put_node(node("n1", &[], &[]));
    with_client(fake, |client| async move {
        let jobs: Api<Job> = Api::default_namespaced(client);
        for (name, ttl) in [("short", Some(1)), ("kept", None)] {
            let mut j = job(name);
            j.spec.as_mut().expect("spec").ttl_seconds_after_finished = ttl;
            jobs.create(&PostParams::default(), &j)
                .await
                .expect("create");
            let pods = fake.start_job_pods("default", name, "n1");
            assert_eq!(pods.len(), 1);
        }
        let done = json!({"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]});
        let finished_at = std::time::Instant::now();
        fake.set_job_status("default", "short", done.clone());
        fake.set_job_status("default", "kept", done);
        loop {
            if jobs.get_opt("short").await.expect("get").is_none() {
                break;
            }
            assert!(
                finished_at.elapsed() < Duration::from_secs(5),
                "never deleted"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            finished_at.elapsed() >= Duration::from_secs(1),
            "deleted before its TTL"
        );
        assert!(jobs.get_opt("kept").await.expect("get").is_some());
    });
    let pods: Vec<String> = fake
        .pods()
        .iter()
        .map(|p| {
            p["metadata"]["labels"]["job-name"]
                .as_str()
                .unwrap_or("?")
                .to_string()
        })
        .collect();
    assert_eq!(pods, ["kept"], "the short Job's pod went with it");
    // The controller deletes in the foreground, as the real one does.
    assert!(fake.deletes().is_empty(), "no client deleted anything");
}

/// `pods/{name}/log` as the API server serves it to kube-rs: plain text,
/// `tailLines` then `limitBytes`; 404 for a missing pod; 400 without a
/// container name when the pod has several, or naming one it lacks.
#[test]
fn pod_logs_are_served_and_refused_as_the_api_server_does() {
    let fake = FakeKube::start();
    fake.put_pod(pod("default", "one", "n1", &[], &[]));
    let mut two = pod("default", "two", "n1", &[], &[]);
    two["spec"]["containers"]
        .as_array_mut()
        .expect("containers")
        .push(json!({"name": "side", "image": "busybox"}));
    fake.put_pod(two);
    fake.set_pod_log("default", "one", "main", "a\nb\nc\n");
    fake.set_pod_log("default", "two", "side", "side car\n");
    with_client(&fake, |client| async move {
        let pods: Api<Pod> = Api::namespaced(client, "default");
        let all = pods
            .logs("one", &LogParams::default())
            .await
            .expect("a log");
        assert_eq!(all, "a\nb\nc\n");
        let tail = LogParams {
            tail_lines: Some(2),
            limit_bytes: Some(3),
            ..LogParams::default()
        };
        assert_eq!(pods.logs("one", &tail).await.expect("a log"), "b\nc");
        let side = LogParams {
            container: Some("side".into()),
            ..LogParams::default()
        };
        assert_eq!(pods.logs("two", &side).await.expect("a log"), "side car\n");
        let e = api_error(
            pods.logs("two", &LogParams::default())
                .await
                .expect_err("which?"),
        );
        assert_eq!(e.code, 400, "{e:?}");
        assert!(e.message.contains("choose one of: [main side]"), "{e:?}");
        let wrong = LogParams {
            container: Some("nope".into()),
            ..LogParams::default()
        };
        let e = api_error(
            pods.logs("one", &wrong)
                .await
                .expect_err("no such container"),
        );
        assert_eq!(e.code, 400, "{e:?}");
        let e = api_error(
            pods.logs("ghost", &LogParams::default())
                .await
                .expect_err("none"),
        );
        assert_eq!(e.code, 404, "{e:?}");
    });
}

/// `spec.managedBy` (Kubernetes "Jobs: Delegation of managing a Job
/// object to external controller", KEP-4368): a domain-prefixed path of at
/// most 63 characters, immutable once set; and the Job status subresource
/// (API concepts, "Subresources"): a PATCH to `jobs/{name}/status` changes
/// the status only (a spec change in it is ignored), bumps the
/// resourceVersion, and a negative count is refused; the main resource
/// ignores status.
#[test]
fn managed_by_is_checked_and_the_status_subresource_writes_status_only() {
    let fake = &FakeKube::start();
    with_client(fake, |client| async move {
        let jobs: Api<Job> = Api::default_namespaced(client);
        let mut bad = serde_json::to_value(job("bad")).expect("json");
        bad["spec"]["managedBy"] = json!("multikueue");
        let status = refused(&jobs, bad.clone()).await;
        assert_invalid(&status, "spec.managedBy", "domain-prefixed path");
        bad["spec"]["managedBy"] = json!(format!("example.com/{}", "x".repeat(60)));
        let status = refused(&jobs, bad).await;
        assert_invalid(&status, "spec.managedBy", "at most 63");

        let mut mk = serde_json::to_value(job("mk")).expect("json");
        mk["spec"]["managedBy"] = json!("kueue.x-k8s.io/multikueue");
        mk["spec"]["suspend"] = json!(true);
        let mk: Job = serde_json::from_value(mk).expect("job");
        let created = jobs
            .create(&PostParams::default(), &mk)
            .await
            .expect("a MultiKueue Job is accepted");
        let managed_by = created.spec.as_ref().and_then(|s| s.managed_by.clone());
        assert_eq!(managed_by.as_deref(), Some("kueue.x-k8s.io/multikueue"));
        let e = jobs
            .patch(
                "mk",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"managedBy": "example.com/other"}})),
            )
            .await
            .expect_err("managedBy is immutable");
        assert_invalid(&api_error(e), "spec.managedBy", "field is immutable");

        // The main resource ignores a status.
        let patched = jobs
            .patch(
                "mk",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"active": 3}})),
            )
            .await
            .expect("patch");
        assert!(patched.status.as_ref().and_then(|s| s.active).is_none());

        // The status subresource writes the status, and nothing else.
        let before = patched.resource_version();
        let written = jobs
            .patch_status(
                "mk",
                &PatchParams::default(),
                &Patch::Merge(json!({
                    "spec": {"parallelism": 7},
                    "status": {"active": 2, "ready": 1},
                })),
            )
            .await
            .expect("status patch");
        let v = serde_json::to_value(&written).expect("json");
        assert_eq!(
            (
                v["status"]["active"].as_i64(),
                v["status"]["ready"].as_i64()
            ),
            (Some(2), Some(1))
        );
        assert_eq!(
            v["spec"]["parallelism"], 1,
            "the spec is not the status' to change"
        );
        assert_ne!(written.resource_version(), before);
        let read = jobs.get_status("mk").await.expect("get status");
        assert_eq!(read.status.and_then(|s| s.active), Some(2));
        // A merge patch with null removes a field.
        let cleared = jobs
            .patch_status(
                "mk",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"active": null, "succeeded": 1}})),
            )
            .await
            .expect("status patch");
        let s = cleared.status.expect("status");
        assert_eq!((s.active, s.succeeded), (None, Some(1)));
        let e = jobs
            .patch_status(
                "mk",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"failed": -1}})),
            )
            .await
            .expect_err("a negative count");
        assert_invalid(&api_error(e), "status.failed", "greater than or equal to 0");
        let e = jobs
            .patch_status(
                "nope",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {}})),
            )
            .await
            .expect_err("no such Job");
        assert_eq!(api_error(e).code, 404);
    });
}

/// Events as kube's `Recorder` publishes them (events.k8s.io/v1, "Event
/// v1 events.k8s.io" in the API reference): the first is created, the
/// same again patches its `series`; an event without a reason or with a
/// note over 1 kB is refused, naming the field; a namespace that does not
/// exist is 404.
#[test]
fn events_are_created_patched_and_validated() {
    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::api::events::v1::Event as K8sEvent;
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    let fake = &FakeKube::start();
    with_client(fake, |client| async move {
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "fleetq.dev/front-door".into(),
                instance: Some("east".into()),
            },
        );
        let about = ObjectReference {
            api_version: Some("batch/v1".into()),
            kind: Some("Job".into()),
            name: Some("train".into()),
            namespace: Some("default".into()),
            uid: Some("u-1".into()),
            ..Default::default()
        };
        let event = Event {
            type_: EventType::Normal,
            reason: "Pending".into(),
            note: Some("waits for quota".into()),
            action: "Admit".into(),
            secondary: None,
        };
        recorder.publish(&event, &about).await.expect("created");
        recorder.publish(&event, &about).await.expect("patched");
        let stored = fake.events();
        assert_eq!(stored.len(), 1, "{stored:#?}");
        assert_eq!(stored[0]["series"]["count"], 2, "{:#}", stored[0]);
        assert_eq!(stored[0]["regarding"]["name"], "train");

        let events: Api<K8sEvent> = Api::default_namespaced(client.clone());
        let mut bad: K8sEvent = serde_json::from_value(stored[0].clone()).expect("event");
        bad.metadata = Default::default();
        bad.metadata.name = Some("bad".into());
        bad.reason = None;
        let e = events
            .create(&PostParams::default(), &bad)
            .await
            .expect_err("no reason");
        assert_invalid(&api_error(e), "reason", "Required value");
        bad.reason = Some("Pending".into());
        bad.note = Some("x".repeat(1025));
        let e = events
            .create(&PostParams::default(), &bad)
            .await
            .expect_err("a long note");
        assert_invalid(&api_error(e), "note", "at most 1024");
        let elsewhere: Api<K8sEvent> = Api::namespaced(client, "nowhere");
        bad.note = None;
        let e = elsewhere
            .create(&PostParams::default(), &bad)
            .await
            .expect_err("no such namespace");
        assert_eq!(api_error(e).code, 404);
    });
}

fn jobset(name: &str, replicated_job: &str, gpus: &str) -> Value {
    json!({
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": {"fleetq.dev/cluster": "east"}},
        "spec": {"replicatedJobs": [{
            "name": replicated_job,
            "replicas": 2,
            "template": {"spec": {
                "parallelism": 2,
                "completions": 2,
                "completionMode": "Indexed",
                "template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "w", "image": "trainer", "resources": {
                        "requests": {"nvidia.com/gpu": gpus}, "limits": {"nvidia.com/gpu": gpus}
                    }}],
                }},
            }},
        }]},
    })
}

/// JobSets, a custom resource: served where the cluster has the API (404
/// where not, as without the CRD), created under the JobSet webhook's
/// name rules and the Job rules for their pod templates, deleted in the
/// foreground with the pods the JobSet owns.
#[test]
fn jobsets_are_served_validated_and_deleted_like_the_api_server_does() {
    use kube::api::DynamicObject;
    use kube::discovery::ApiResource;
    let resource = ApiResource {
        group: "jobset.x-k8s.io".into(),
        version: "v1alpha2".into(),
        api_version: "jobset.x-k8s.io/v1alpha2".into(),
        kind: "JobSet".into(),
        plural: "jobsets".into(),
    };
    let as_object = |v: Value| -> DynamicObject { serde_json::from_value(v).expect("an object") };

    let without = FakeKube::start_with(Options {
        jobset_api: false,
        ..Options::default()
    });
    with_client(&without, |client| {
        let resource = resource.clone();
        async move {
            let api: Api<DynamicObject> = Api::all_with(client, &resource);
            let status = api_error(api.list(&ListParams::default()).await.unwrap_err());
            assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));
        }
    });

    let fake = FakeKube::start();
    with_client(&fake, |client| {
        let resource = resource.clone();
        async move {
            let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
            let created = api
                .create(
                    &PostParams::default(),
                    &as_object(jobset("train", "workers", "2")),
                )
                .await
                .expect("created");
            assert!(created.metadata.uid.is_some());
            assert_eq!(created.data["spec"]["suspend"], false, "defaulted");

            // `train-workers-1-1-abcde` is fine; a name that makes the
            // derived pod names longer than 63 characters is not.
            let long = "l".repeat(50);
            let status = api_error(
                api.create(
                    &PostParams::default(),
                    &as_object(jobset(&long, "workers", "2")),
                )
                .await
                .unwrap_err(),
            );
            assert_invalid(
                &status,
                "metadata.name",
                "must be no more than 63 characters",
            );
            // A replicated Job named like no DNS-1035 label.
            let status = api_error(
                api.create(
                    &PostParams::default(),
                    &as_object(jobset("t2", "1workers", "2")),
                )
                .await
                .unwrap_err(),
            );
            assert_invalid(&status, "spec.replicatedJobs[0].name", "DNS-1035");
            // The pod template under the Job rules: a device request
            // without an equal limit.
            let mut bad = jobset("t3", "workers", "2");
            bad["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
                ["containers"][0]["resources"]["limits"] = json!({});
            let status = api_error(
                api.create(&PostParams::default(), &as_object(bad))
                    .await
                    .unwrap_err(),
            );
            assert_invalid(
                &status,
                "spec.replicatedJobs[0].template.spec.template.spec.containers[0].resources.limits",
                "Limit must be set",
            );
        }
    });
    let pods = fake.start_jobset_pods("default", "train", "gpu-1");
    assert_eq!(pods.len(), 4, "2 Jobs x 2 pods");
    assert_eq!(
        fake.pods()[0]["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"],
        "0"
    );
    with_client(&fake, |client| {
        let resource = resource.clone();
        async move {
            let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
            let foreground = DeleteParams::foreground();
            api.delete("train", &foreground).await.expect("deleted");
            let terminating = api.get("train").await.expect("still there, terminating");
            assert!(terminating.metadata.deletion_timestamp.is_some());
            for _ in 0..100 {
                if api.get_opt("train").await.expect("read").is_none() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            panic!("the JobSet was never removed");
        }
    });
    assert!(fake.pods().is_empty(), "its pods went first");
}

/// A JobSet's replicated Jobs are immutable but for their pod templates'
/// scheduling directives while it is suspended (the JobSet webhook);
/// metadata patches are fine; the status subresource writes status only.
#[test]
fn a_jobsets_replicated_jobs_are_immutable_but_for_scheduling_while_suspended() {
    use kube::api::DynamicObject;
    use kube::discovery::ApiResource;
    let fake = FakeKube::start();
    let mut suspended = jobset("train", "workers", "1");
    suspended["spec"]["suspend"] = json!(true);
    fake.kubectl_create_jobset(suspended);
    with_client(&fake, |client| async move {
        let resource = ApiResource {
            group: "jobset.x-k8s.io".into(),
            version: "v1alpha2".into(),
            api_version: "jobset.x-k8s.io/v1alpha2".into(),
            kind: "JobSet".into(),
            plural: "jobsets".into(),
        };
        let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
        let params = PatchParams::default();
        let annotate = json!({"metadata": {"annotations": {"fleetq.dev/workload": "default/w"}}});
        api.patch("train", &params, &Patch::Merge(&annotate))
            .await
            .expect("metadata patches");
        let current = api.get("train").await.expect("read");
        let mut jobs = current.data["spec"]["replicatedJobs"].clone();
        jobs[0]["template"]["spec"]["template"]["spec"]["nodeSelector"] =
            json!({"nvidia.com/gpu.product": "H100"});
        api.patch(
            "train",
            &params,
            &Patch::Merge(&json!({"spec": {"replicatedJobs": jobs.clone()}})),
        )
        .await
        .expect("a suspended JobSet's pods may be steered");
        jobs[0]["template"]["spec"]["template"]["spec"]["containers"][0]["image"] = json!("other");
        let status = api_error(
            api.patch(
                "train",
                &params,
                &Patch::Merge(&json!({"spec": {"replicatedJobs": jobs}})),
            )
            .await
            .unwrap_err(),
        );
        assert_invalid(&status, "spec.replicatedJobs", "field is immutable");
        let written = api
            .patch_status(
                "train",
                &params,
                &Patch::Merge(&json!({"status": {"replicatedJobsStatus": [{"name": "workers", "ready": 2}]}, "spec": {"suspend": false}})),
            )
            .await
            .expect("status patched");
        assert_eq!(
            written.data["status"]["replicatedJobsStatus"][0]["ready"],
            2
        );
        assert_eq!(
            written.data["spec"]["suspend"], true,
            "status writes status only"
        );
    });
}

/// A pod's spec is immutable but for what `ValidatePodUpdate` lets
/// change; scheduling gates can only be removed ("Pod Scheduling
/// Readiness": "only deletion is allowed"), and while a pod is gated its
/// node selector may gain keys and its required node-affinity terms gain
/// requirements ("Mutable Pod Scheduling Directives"), nothing more. The
/// scheduler leaves a gated pod alone, and binds an ungated one only
/// where its selector and affinity match.
#[test]
fn a_gated_pods_scheduling_may_only_narrow_and_its_gates_only_go() {
    let fake = &FakeKube::start();
    fake.put_node(node("gpu-a", &[("zone", "a")], &[("nvidia.com/gpu", "8")]));
    fake.put_node(node("gpu-b", &[("zone", "b")], &[("nvidia.com/gpu", "8")]));
    let gated = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}, {"name": "example.com/other"}],
            "nodeSelector": {"zone": "a"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}}},
            "containers": [{"name": "c", "image": "busybox"}],
        },
    });
    let created = fake.kubectl_create_pod(gated);
    assert!(fake
        .bind_pod("default", "p", "gpu-a")
        .unwrap_err()
        .contains("gated"));
    with_client(fake, |client| async move {
        let pods: Api<Pod> = Api::default_namespaced(client);
        let patch = |p: Value| {
            let pods = pods.clone();
            async move {
                pods.patch("p", &PatchParams::default(), &Patch::Merge(&p))
                    .await
            }
        };
        // A gate added: refused.
        let e = api_error(
            patch(json!({"spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}, {"name": "example.com/other"}, {"name": "new"}]}}))
                .await
                .expect_err("no gate can be added"),
        );
        assert_invalid(&e, "spec.schedulingGates[2]", "only deletion is allowed");
        // A node selector key changed: refused; one added: taken.
        let e = api_error(
            patch(json!({"spec": {"nodeSelector": {"zone": "b"}}}))
                .await
                .expect_err("no mutation"),
        );
        assert_invalid(&e, "spec.nodeSelector", "only additions");
        patch(json!({"spec": {"nodeSelector": {"kubernetes.io/os": "linux"}}}))
            .await
            .expect("a key added");
        // A term replaced: refused; narrowed: taken.
        let terms = |t: Value| json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": t}}}}});
        let e = api_error(
            patch(terms(json!([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-a"]}]}])))
                .await
                .expect_err("a requirement dropped"),
        );
        assert_invalid(&e, "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms", "only additions");
        patch(terms(json!([{
            "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}],
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-a"]}],
        }])))
        .await
        .expect("narrowed");
        // Anything else in the spec: refused.
        let e = api_error(
            patch(json!({"spec": {"restartPolicy": "Never"}}))
                .await
                .expect_err("immutable"),
        );
        assert_invalid(&e, "spec", "pod updates may not change fields");
        // Preconditions hold for pods too.
        let e = api_error(
            patch(json!({"metadata": {"uid": "someone-else"}, "spec": {"schedulingGates": null}}))
                .await
                .expect_err("another uid"),
        );
        assert_eq!(e.code, 409, "{e:?}");
        // The gates removed: the scheduler binds it, but only where its
        // selector and affinity say (the kubernetes.io/os key added
        // above is no label of these nodes).
        patch(json!({"metadata": {"uid": created["metadata"]["uid"]}, "spec": {"schedulingGates": null}}))
            .await
            .expect("gates removed");
    });
    let e = fake.bind_pod("default", "p", "gpu-a").unwrap_err();
    assert!(e.contains("kubernetes.io/os"), "{e}");
    // Once ungated, its scheduling is immutable again.
    with_client(fake, |client| async move {
        let pods: Api<Pod> = Api::default_namespaced(client);
        let e = api_error(
            pods.patch(
                "p",
                &PatchParams::default(),
                &Patch::Merge(&json!({"spec": {"nodeSelector": {"more": "x"}}})),
            )
            .await
            .expect_err("not gated any more"),
        );
        assert_invalid(&e, "spec", "pod updates may not change fields");
    });
    let free = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "q", "namespace": "default"},
        "spec": {
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-b"]}]}]}}},
            "containers": [{"name": "c", "image": "busybox"}],
        },
    });
    fake.kubectl_create_pod(free);
    assert!(fake.bind_pod("default", "q", "gpu-a").is_err());
    fake.bind_pod("default", "q", "gpu-b").expect("its node");
    let bound = fake.pod("default", "q").expect("q");
    assert_eq!(
        (
            bound["spec"]["nodeName"].as_str(),
            bound["status"]["phase"].as_str()
        ),
        (Some("gpu-b"), Some("Running"))
    );
}

/// Kubeflow's PyTorchJob, a custom resource: 404 on a cluster without
/// the Training Operator; created, listed, merge-patched and deleted
/// where it is installed; refused as its webhook refuses (a name that is
/// no DNS-1035 label, a replica type other than Master and Worker, two
/// Masters) and as the API server refuses a pod template.
#[test]
fn pytorchjobs_are_served_and_validated_like_the_training_operator_does() {
    use kube::api::DynamicObject;
    use kube::discovery::ApiResource;
    let resource = ApiResource {
        group: "kubeflow.org".into(),
        version: "v1".into(),
        api_version: "kubeflow.org/v1".into(),
        kind: "PyTorchJob".into(),
        plural: "pytorchjobs".into(),
    };
    let job = |name: &str, specs: Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name},
            "spec": {"runPolicy": {"suspend": true}, "pytorchReplicaSpecs": specs},
        }))
        .expect("an object")
    };
    let replica = |n: u32, gpus: &str| {
        json!({"replicas": n, "template": {"spec": {"containers": [{"name": "pytorch", "image": "i",
            "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}})
    };
    let without = FakeKube::start_with(Options {
        kubeflow_api: false,
        ..Options::default()
    });
    with_client(&without, |client| {
        let resource = resource.clone();
        async move {
            let api: Api<DynamicObject> = Api::all_with(client, &resource);
            let status = api_error(api.list(&ListParams::default()).await.unwrap_err());
            assert_eq!((status.code, status.reason.as_str()), (404, "NotFound"));
        }
    });
    let fake = FakeKube::start();
    with_client(&fake, |client| async move {
        let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
        let created = api
            .create(
                &PostParams::default(),
                &job(
                    "train",
                    json!({"Master": replica(1, "1"), "Worker": replica(2, "2")}),
                ),
            )
            .await
            .expect("created");
        assert!(created.metadata.uid.is_some());
        let status = api_error(
            api.create(
                &PostParams::default(),
                &job("9train", json!({"Worker": replica(1, "1")})),
            )
            .await
            .unwrap_err(),
        );
        assert_invalid(&status, "metadata.name", "DNS-1035");
        let status = api_error(
            api.create(
                &PostParams::default(),
                &job("chief", json!({"Chief": replica(1, "1")})),
            )
            .await
            .unwrap_err(),
        );
        assert_invalid(
            &status,
            "spec.pytorchReplicaSpecs[Chief]",
            "supported values",
        );
        let status = api_error(
            api.create(
                &PostParams::default(),
                &job("two", json!({"Master": replica(2, "1")})),
            )
            .await
            .unwrap_err(),
        );
        assert_invalid(
            &status,
            "spec.pytorchReplicaSpecs[Master].replicas",
            "must be 1",
        );
        let status = api_error(
            api.create(
                &PostParams::default(),
                &job("half", json!({"Worker": replica(1, "0.5")})),
            )
            .await
            .unwrap_err(),
        );
        assert_eq!(status.code, 422, "{status:?}");
        let patched = api
            .patch(
                "train",
                &PatchParams::default(),
                &Patch::Merge(&json!({"metadata": {"annotations": {"a": "b"}}, "spec": {"runPolicy": {"suspend": false}}})),
            )
            .await
            .expect("patched");
        assert_eq!(patched.data["spec"]["runPolicy"]["suspend"], false);
        assert_eq!(patched.metadata.annotations.unwrap_or_default()["a"], "b");
        api.delete("train", &DeleteParams::default())
            .await
            .expect("deleted");
    });
    assert!(fake.custom_objects("PyTorchJob").is_empty());
}

/// KubeRay's RayJob, a custom resource: 404 without KubeRay; refused as
/// its webhook refuses (a name over 47 characters, two worker groups of
/// one name) and as the API server refuses a pod template.
#[test]
fn rayjobs_are_served_and_validated_like_kuberay_does() {
    let job = |name: &str, groups: &[&str], gpus: &str| {
        let template = json!({"spec": {"containers": [{"name": "ray", "image": "i",
            "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}});
        json!({
            "apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"rayClusterSpec": {
                "headGroupSpec": {"template": template.clone()},
                "workerGroupSpecs": groups.iter().map(|g| json!({"groupName": g, "template": template.clone()})).collect::<Vec<_>>(),
            }},
        })
    };
    let resource = kube::discovery::ApiResource {
        group: "ray.io".into(),
        version: "v1".into(),
        api_version: "ray.io/v1".into(),
        kind: "RayJob".into(),
        plural: "rayjobs".into(),
    };
    let as_object =
        |v: Value| -> kube::api::DynamicObject { serde_json::from_value(v).expect("an object") };
    let without = FakeKube::start_with(Options {
        ray_api: false,
        ..Options::default()
    });
    with_client(&without, |client| {
        let resource = resource.clone();
        async move {
            let api: Api<kube::api::DynamicObject> = Api::all_with(client, &resource);
            let status = api_error(api.list(&ListParams::default()).await.unwrap_err());
            assert_eq!(status.code, 404);
        }
    });
    let fake = FakeKube::start();
    let made = fake.kubectl_create_custom(job("tune", &["a", "b"], "1"));
    assert!(made["metadata"]["uid"].is_string());
    with_client(&fake, |client| async move {
        let api: Api<kube::api::DynamicObject> = Api::namespaced_with(client, "default", &resource);
        let refused = |v: Value| {
            let api = api.clone();
            async move {
                api_error(
                    api.create(&PostParams::default(), &as_object(v))
                        .await
                        .unwrap_err(),
                )
            }
        };
        let status = refused(job(&"r".repeat(48), &["a"], "1")).await;
        assert_invalid(&status, "metadata.name", "47 characters");
        let status = refused(job("twice", &["a", "a"], "1")).await;
        assert_invalid(
            &status,
            "spec.rayClusterSpec.workerGroupSpecs[1].groupName",
            "Duplicate value",
        );
        let status = refused(job("half", &["a"], "0.5")).await;
        assert_eq!(status.code, 422, "{status:?}");
    });
    fake.kubectl_delete_custom("RayJob", "default", "tune");
    assert!(fake.custom_objects("RayJob").is_empty());
}
