//! Who a client certificate names, per request: parsed from the X.509
//! each time (what the service door and the handler both did) against the
//! answer remembered per certificate ([`IdentityCache`]).
//!
//! `cargo bench -p fleetq-proto --bench identity`

use criterion::{criterion_group, criterion_main, Criterion};
use fleetq_proto::tls::{Identity, IdentityCache};

fn certificate() -> rustls_pki_types::CertificateDer<'static> {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).expect("params");
    params.subject_alt_names.push(rcgen::SanType::URI(
        rcgen::string::Ia5String::try_from(Identity::Tenant("team-a".into()).uri()).expect("uri"),
    ));
    params.self_signed(&key).expect("cert").der().clone()
}

fn identity(c: &mut Criterion) {
    let cert = certificate();
    let mut group = c.benchmark_group("identity per request");
    group.bench_function("parsed each time", |b| {
        b.iter(|| Identity::of_certificate(std::hint::black_box(&cert)))
    });
    let cache = IdentityCache::default();
    group.bench_function("remembered per certificate", |b| {
        b.iter(|| cache.identity(std::hint::black_box(&cert)))
    });
    group.finish();
}

criterion_group!(benches, identity);
criterion_main!(benches);
