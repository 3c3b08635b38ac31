//! Structurally valid config requests (DescribeConfigs, AlterConfigs,
//! IncrementalAlterConfigs) at every advertised version, with hostile values: the broker
//! neither panics nor grows without bound.

use super::hostile::values;
use super::*;

/// A structurally valid config request (DescribeConfigs, AlterConfigs,
/// IncrementalAlterConfigs) with hostile values.
fn hostile_config_request(rng: &mut rand::rngs::StdRng, api: ApiKey) -> Option<RequestKind> {
    use rand::seq::SliceRandom;
    use rand::Rng;
    let s = |v: String| StrBytes::from_string(v);
    let resource_type =
        |rng: &mut rand::rngs::StdRng| *[2i8, 2, 4, 9, -1, i8::MAX].choose(rng).unwrap_or(&2);
    let resource_name = |rng: &mut rand::rngs::StdRng| match rng.gen_range(0..8) {
        0 => String::new(),
        1 => "nope".into(),
        2 => "1".into(),
        3 => "-1".into(),
        4 => "x".repeat(rng.gen_range(1..20_000)),
        _ => "t".into(),
    };
    let config_name = |rng: &mut rand::rngs::StdRng| match rng.gen_range(0..6) {
        0 => String::new(),
        1 => "no.such.config".into(),
        2 => "é".repeat(rng.gen_range(1..5_000)),
        _ => crate::topics::config::TOPIC_CONFIGS
            .choose(rng)
            .map_or("retention.bytes".into(), |d| d.name.to_string()),
    };
    let value = |rng: &mut rand::rngs::StdRng| -> Option<StrBytes> {
        match rng.gen_range(0..9) {
            0 => None,
            1 => Some(s(String::new())),
            2 => Some(s("compact,delete,compact".into())),
            3 => Some(s("9".repeat(rng.gen_range(1..40)))),
            4 => Some(s("-".into())),
            5 => Some(s(",".repeat(rng.gen_range(1..10_000)))),
            6 => Some(s("true".into())),
            _ => Some(s(values::int(rng).to_string())),
        }
    };
    let count = |rng: &mut rand::rngs::StdRng| *[0usize, 1, 2, 3, 60].choose(rng).unwrap_or(&1);
    Some(match api {
        ApiKey::DescribeConfigs => RequestKind::DescribeConfigs(
            DescribeConfigsRequest::default()
                .with_include_synonyms(rng.gen())
                .with_include_documentation(rng.gen())
                .with_resources(
                    (0..count(rng))
                        .map(|_| {
                            DescribeConfigsResource::default()
                                .with_resource_type(resource_type(rng))
                                .with_resource_name(s(resource_name(rng)))
                                .with_configuration_keys(rng.gen_bool(0.5).then(|| {
                                    (0..count(rng)).map(|_| s(config_name(rng))).collect()
                                }))
                        })
                        .collect(),
                ),
        ),
        ApiKey::AlterConfigs => RequestKind::AlterConfigs(
            AlterConfigsRequest::default()
                .with_validate_only(rng.gen())
                .with_resources(
                    (0..count(rng))
                        .map(|_| {
                            alter_configs_request::AlterConfigsResource::default()
                                .with_resource_type(resource_type(rng))
                                .with_resource_name(s(resource_name(rng)))
                                .with_configs(
                                    (0..count(rng))
                                        .map(|_| {
                                            alter_configs_request::AlterableConfig::default()
                                                .with_name(s(config_name(rng)))
                                                .with_value(value(rng))
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                ),
        ),
        ApiKey::IncrementalAlterConfigs => RequestKind::IncrementalAlterConfigs(
            IncrementalAlterConfigsRequest::default()
                .with_validate_only(rng.gen())
                .with_resources(
                    (0..count(rng))
                        .map(|_| {
                            incremental_alter_configs_request::AlterConfigsResource::default()
                                .with_resource_type(resource_type(rng))
                                .with_resource_name(s(resource_name(rng)))
                                .with_configs(
                                    (0..count(rng))
                                        .map(|_| {
                                            incremental_alter_configs_request::AlterableConfig::default()
                                                .with_name(s(config_name(rng)))
                                                .with_config_operation(*[0i8, 1, 2, 3, 3, 4, -1, i8::MIN].choose(rng).unwrap_or(&0))
                                                .with_value(value(rng))
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                ),
        ),
        _ => return None,
    })
}

#[test]
fn hostile_config_requests_at_every_version_neither_panic_nor_grow_without_bound() {
    // Random resource types and names (this broker, others, 20 KB of 'x'), config names
    // (every real one, unknown, empty, 10 KB), operations (the four and bogus codes) and
    // values (null, empty, overflowing numbers, 10 000 commas), encoded and decoded as on
    // the wire, at every advertised version of the three config APIs. Every request is
    // answered at once, the answer encodes, and the topic never holds more overrides than
    // there are configs, nor does any request create a topic.
    use rand::SeedableRng;
    let apis = KafkaApis::new(ReplicaManager::new(manual_config(|_| {})));
    auto_create(&apis, "t");
    let rm = apis.replica_manager.clone();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xc0f1);
    let mut handled = 0;
    let mut altered = 0;
    for round in 0..60 {
        for api in [
            ApiKey::DescribeConfigs,
            ApiKey::AlterConfigs,
            ApiKey::IncrementalAlterConfigs,
        ] {
            let (min, max) = crate::handlers::supported_range(api).expect("advertised");
            for version in min..=max {
                let Some(request) = hostile_config_request(&mut rng, api) else {
                    continue;
                };
                let Some(request) = over_the_wire(api, version, &request) else {
                    continue; // a field this version cannot carry
                };
                let ctx = context("fuzz", round, version);
                let Reply::Now(response) = apis.handle(&ctx, request) else {
                    panic!("{api:?} v{version}: not answered at once");
                };
                round_trip(api, version, &response);
                handled += 1;
                let topics = rm.topics();
                assert_eq!(topics.len(), 1, "a config request created a topic");
                let overrides = topics[0].config.overrides().len();
                assert!(overrides <= crate::topics::config::TOPIC_CONFIGS.len());
                if overrides > 0 {
                    altered += 1;
                }
            }
        }
    }
    assert!(handled > 300, "only {handled} hostile requests handled");
    assert!(
        altered > 0,
        "no hostile request ever changed a config: the fuzz is too blunt"
    );
}
