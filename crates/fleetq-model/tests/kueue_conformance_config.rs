//! Kueue's validation rules for the configuration kinds (ResourceFlavor,
//! Cohort, ClusterQueue, LocalQueue, WorkloadPriorityClass), both API
//! versions, each a case with its Kueue source and test (issue 28, items
//! 1 and 8). The harness and the meaning of the columns:
//! `conformance/mod.rs`. Generated cases for the size limits are below
//! the table. Kueue read at main ff69552e (v0.20 development); rules that
//! only apply on update, to `status`, or behind feature gates off by
//! default are listed in `docs/kueue-conformance.md` with why they are
//! not cases here.

mod conformance;

use conformance::{
    errors, run, Case,
    Expect::{Accept, Refuse},
};

/// What every case is applied on top of.
const BASE: &str = r#"
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: alpha}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: root}
"#;

const CASES: &[Case] = &[
    Case {
        rule: "RF-01",
        kueue: "apiserver (metadata.name: DNS-1123 subdomain)",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: Flavor_1}
"#,
        expect: Refuse("metadata.name"),
    },
    Case {
        rule: "RF-01b",
        kueue: "apiserver",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: a.b-c}
"#,
        expect: Accept,
    },
    Case {
        rule: "RF-03",
        kueue: "wh/resourceflavor_webhook.go:88",
        kueue_test: r#"UT-RF:53 "invalid label name""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f1}
spec:
  nodeLabels: {"@abc": foo}
"#,
        expect: Refuse(r#"spec.nodeLabels["@abc"]"#),
    },
    Case {
        rule: "RF-03b",
        kueue: "wh/resourceflavor_webhook.go:88",
        kueue_test: r#"UT-RF:61 "invalid label value""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f1}
spec:
  nodeLabels: {foo: "@abc"}
"#,
        expect: Refuse("spec.nodeLabels.foo"),
    },
    Case {
        rule: "RF-03c",
        kueue: "wh/resourceflavor_webhook.go:88",
        kueue_test: r#"UT-RF:43 "valid""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f1}
spec:
  nodeLabels: {foo: bar, example.com/zone: a}
"#,
        expect: Accept,
    },
    Case {
        rule: "RF-05",
        kueue: "CRD corev1.Taint (effect required)",
        kueue_test: r#"IT-RF:154 "Should fail to create with invalid taints""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f1}
spec:
  nodeTaints: [{key: skdajf}]
"#,
        expect: Refuse("spec.nodeTaints[0].effect"),
    },
    Case {
        rule: "RF-06",
        kueue: "a2/resourceflavor_types.go:83 (CEL)",
        kueue_test: r#"IT-RF:117 "Should fail to update""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f1}
spec:
  nodeTaints: [{key: foo, value: bar, effect: Invalid}]
"#,
        expect: Refuse("spec.nodeTaints[0].effect"),
    },
    Case {
        rule: "RF-07",
        kueue: "wh/resourceflavor_webhook.go:104",
        kueue_test: "IT-RF:154 (second taint)",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f1}
spec:
  nodeTaints: [{key: "@foo", effect: NoSchedule}]
"#,
        expect: Refuse("spec.nodeTaints[0].key"),
    },
    Case {
        rule: "RF-08",
        kueue: "wh/resourceflavor_webhook.go:106",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f1}
spec:
  nodeTaints: [{key: a, value: "a b", effect: NoSchedule}]
"#,
        expect: Refuse("spec.nodeTaints[0].value"),
    },
    Case {
        rule: "RF-09",
        kueue: "wh/resourceflavor_webhook.go:111",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f1}
spec:
  nodeTaints: [{key: a, effect: NoSchedule}, {key: a, value: b, effect: NoSchedule}]
"#,
        expect: Refuse("spec.nodeTaints[1]"),
    },
    Case {
        rule: "RF-09b",
        kueue: "wh/resourceflavor_webhook.go:111",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f1}
spec:
  nodeTaints: [{key: a, effect: NoSchedule}, {key: a, effect: NoExecute}]
"#,
        expect: Accept,
    },
    Case {
        rule: "RF-11a",
        kueue: "a2/resourceflavor_types.go:97 (CEL)",
        kueue_test: r#"IT-RF:168 "Should fail to create with invalid tolerations""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f1}
spec:
  tolerations: [{operator: Equal, value: v}]
"#,
        expect: Refuse("spec.tolerations[0].operator"),
    },
    Case {
        rule: "RF-11b",
        kueue: "a2/resourceflavor_types.go:98 (CEL)",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f1}
spec:
  tolerations: [{key: a, operator: Exists, effect: NoSchedule, tolerationSeconds: 5}]
"#,
        expect: Refuse("spec.tolerations[0].effect"),
    },
    Case {
        rule: "RF-11c",
        kueue: "a2/resourceflavor_types.go:99 (CEL)",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f1}
spec:
  tolerations: [{key: a, operator: Sometimes}]
"#,
        expect: Refuse("spec.tolerations[0].operator"),
    },
    Case {
        rule: "RF-11d",
        kueue: "a2/resourceflavor_types.go:100 (CEL)",
        kueue_test: "IT-RF:168",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f1}
spec:
  tolerations: [{key: abc, operator: Exists, value: v}]
"#,
        expect: Refuse("spec.tolerations[0].value"),
    },
    Case {
        rule: "RF-11e",
        kueue: "a2/resourceflavor_types.go:101 (CEL)",
        kueue_test: "IT-RF:168",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f1}
spec:
  tolerations: [{key: abc, operator: Equal, value: v, effect: not-valid}]
"#,
        expect: Refuse("spec.tolerations[0].effect"),
    },
    Case {
        rule: "RF-11f",
        kueue: "a2/resourceflavor_types.go:97-101",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f1}
spec:
  tolerations: [{operator: Exists}, {key: a, operator: Exists, effect: NoExecute, tolerationSeconds: 5}]
"#,
        expect: Accept,
    },
    Case {
        rule: "RF-12",
        kueue: "wh/workload_webhook.go:263",
        kueue_test: "IT-RF:168 (first toleration)",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f1}
spec:
  tolerations: [{key: "@abc", operator: Equal, value: v}]
"#,
        expect: Refuse("spec.tolerations[0].key"),
    },
    Case {
        rule: "RF-13",
        kueue: "a2/resourceflavor_types.go:43",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f1}
spec:
  topologyName: My_Topo
  nodeLabels: {a: b}
"#,
        expect: Refuse("spec.topologyName"),
    },
    Case {
        rule: "RF-14",
        kueue: "a2/resourceflavor_types.go:48 (CEL)",
        kueue_test: r#"IT-TAS:270 "should not allow to create ResourceFlavor without any node labels""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f1}
spec:
  topologyName: default
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: default}
spec:
  levels:
  - nodeLabel: kubernetes.io/hostname
"#,
        expect: Refuse("spec.topologyName"),
    },
    Case {
        rule: "CO-02",
        kueue: "a2/cohort_types.go:36",
        kueue_test: r#"IT-CO:62 "Should reject invalid parent name""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  parentName: "@prod"
"#,
        expect: Refuse("spec.parentName"),
    },
    Case {
        rule: "CO-02b",
        kueue: "a2/cohort_types.go:36",
        kueue_test: r#"IT-CO:59 "Should allow valid parent name""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  parentName: prod
"#,
        expect: Accept,
    },
    Case {
        rule: "CO-04",
        kueue: "a2/clusterqueue_types.go:261 (minItems 1)",
        kueue_test: r#"IT-CO:65 "ResourceGroup should have at least one flavor""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  resourceGroups:
  - coveredResources: []
    flavors: []
"#,
        expect: Refuse("spec.resourceGroups[0].coveredResources"),
    },
    Case {
        rule: "CO-06",
        kueue: "a2/clusterqueue_types.go:346",
        kueue_test: r#"IT-CO:129 "Should reject flavor with invalid name""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  parentName: root
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: x_86
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.resourceGroups[0].flavors[0].name"),
    },
    Case {
        rule: "CO-07",
        kueue: "a2/clusterqueue_types.go:292 (minItems 1)",
        kueue_test: r#"IT-CO:68 "FlavorQuota should have at least one resource""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  parentName: root
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: []
"#,
        expect: Refuse("spec.resourceGroups[0].flavors[0].resources"),
    },
    Case {
        rule: "CO-08",
        kueue: "a2/clusterqueue_types.go:300 (nominalQuota required)",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  parentName: root
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu}
"#,
        expect: Refuse("spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"),
    },
    Case {
        rule: "CO-09",
        kueue: "a2/clusterqueue_types.go:254 (CEL)",
        kueue_test: r#"IT-CO:254 "Should reject missing resources in a flavor""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  parentName: root
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.resourceGroups[0].flavors[0].resources"),
    },
    Case {
        rule: "CO-09b",
        kueue: "a2/clusterqueue_types.go:254 (CEL)",
        kueue_test: r#"IT-CO:273 "Should reject resource not defined in resource group""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  parentName: root
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
      - {name: memory, nominalQuota: 1}
"#,
        expect: Refuse("spec.resourceGroups[0].flavors[0].resources"),
    },
    Case {
        rule: "CO-11",
        kueue: "wh/common.go:29",
        kueue_test: r#"IT-CO:114 "Should reject resource with invalid name""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  parentName: root
  resourceGroups:
  - coveredResources: ["@cpu"]
    flavors:
    - name: default
      resources:
      - {name: "@cpu", nominalQuota: 1}
"#,
        expect: Refuse("spec.resourceGroups[0].coveredResources[0]"),
    },
    Case {
        rule: "CO-11b",
        kueue: "wh/common.go:29",
        kueue_test: r#"IT-CO:109 "Should allow valid resource name""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  parentName: root
  resourceGroups:
  - coveredResources: [example.com/gpu]
    flavors:
    - name: default
      resources:
      - {name: example.com/gpu, nominalQuota: 1}
"#,
        expect: Accept,
    },
    Case {
        rule: "CO-12",
        kueue: "wh/clusterqueue_webhook.go:312",
        kueue_test: r#"IT-CO:293 "Should reject resource in more than one resource group""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  parentName: root
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
  - coveredResources: [cpu]
    flavors:
    - name: alpha
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.resourceGroups[1].coveredResources[0]"),
    },
    Case {
        rule: "CO-13",
        kueue: "wh/clusterqueue_webhook.go:321",
        kueue_test: r#"IT-CO:308 "Should reject flavor in more than one resource group""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  parentName: root
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
  - coveredResources: [memory]
    flavors:
    - name: default
      resources:
      - {name: memory, nominalQuota: 1}
"#,
        expect: Refuse("spec.resourceGroups[1].flavors[0].name"),
    },
    Case {
        rule: "CO-14",
        kueue: "wh/clusterqueue_webhook.go:339",
        kueue_test: r#"IT-CO:230 "Should reject resources in a flavor in different order""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  parentName: root
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - {name: memory, nominalQuota: 1}
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.resourceGroups[0].flavors[0].resources[0].name"),
    },
    Case {
        rule: "CO-15",
        kueue: "wh/clusterqueue_webhook.go:342",
        kueue_test: r#"IT-CO:134 "Should reject negative nominal quota""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  parentName: root
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "-1"}
"#,
        expect: Refuse("spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"),
    },
    Case {
        rule: "CO-16",
        kueue: "wh/clusterqueue_webhook.go:343",
        kueue_test: r#"IT-CO:139 "Should reject negative borrowing limit""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  parentName: root
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1, borrowingLimit: "-1"}
"#,
        expect: Refuse("spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit"),
    },
    Case {
        rule: "CO-17",
        kueue: "wh/clusterqueue_webhook.go:348",
        kueue_test: r#"IT-CO:144 "Should reject negative lending limit""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  parentName: root
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1, lendingLimit: "-1"}
"#,
        expect: Refuse("spec.resourceGroups[0].flavors[0].resources[0].lendingLimit"),
    },
    Case {
        rule: "CO-18",
        kueue: "wh/clusterqueue_webhook.go:368",
        kueue_test: r#"UT-CO:40 "flavor quota with lendingLimit and empty parent""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1, lendingLimit: 1}
"#,
        expect: Refuse("spec.resourceGroups[0].flavors[0].resources[0].lendingLimit"),
    },
    Case {
        rule: "CO-18b",
        kueue: "wh/clusterqueue_webhook.go:368",
        kueue_test: r#"IT-CO:149 "Should reject borrowingLimit when no parent""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1, borrowingLimit: 1}
"#,
        expect: Refuse("spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit"),
    },
    Case {
        rule: "CO-19",
        kueue: "wh/cohort_webhook.go:71 (no lendingLimit <= nominal for cohorts)",
        kueue_test: r#"IT-CO:198 "Should allow lending limit to exceed nominal quota""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  parentName: root
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 3, lendingLimit: 5}
"#,
        expect: Accept,
    },
    Case {
        rule: "CO-20",
        kueue: "wh/common.go:50",
        kueue_test: r#"IT-CO:325 "Should forbid negative FairSharing weight""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  fairSharing: {weight: "-1"}
"#,
        expect: Refuse("spec.fairSharing.weight"),
    },
    Case {
        rule: "CO-20b",
        kueue: "wh/common.go:50",
        kueue_test: "IT-CO:322 (weight 0)",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  fairSharing: {weight: "0"}
"#,
        expect: Accept,
    },
    Case {
        rule: "CO-21",
        kueue: "wh/common.go:56",
        kueue_test: r#"IT-CO:343 "Should forbid threshold FairSharing weight""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  fairSharing: {weight: 1n}
"#,
        expect: Refuse("spec.fairSharing.weight"),
    },
    Case {
        rule: "CO-21b",
        kueue: "wh/common.go:56",
        kueue_test: r#"IT-CO:347 "Should forbid collapsed FairSharing weight""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  fairSharing: {weight: "0.0000000001"}
"#,
        expect: Refuse("spec.fairSharing.weight"),
    },
    Case {
        rule: "CO-21c",
        kueue: "wh/common.go:56",
        kueue_test: "IT-CO:339 (2n)",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  fairSharing: {weight: 2n}
"#,
        expect: Accept,
    },
    Case {
        rule: "CO-x",
        kueue: "Kueue creates implicit parent cohorts",
        kueue_test: "IT-CO:59",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: co}
spec:
  parentName: nobody-made-me
"#,
        expect: Accept,
    },
    Case {
        rule: "CQ-01",
        kueue: "apiserver",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: CQ_1}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("metadata.name"),
    },
    Case {
        rule: "CQ-02",
        kueue: "a2/clusterqueue_types.go:61",
        kueue_test: r#"IT-CQ:308 "Should forbid to create clusterQueue with invalid cohort""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  cohortName: "@prod"
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.cohortName"),
    },
    Case {
        rule: "CQ-02b",
        kueue: "a1/clusterqueue_types.go:51",
        kueue_test: "IT-CQ:308 (v1beta1)",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  cohort: "@prod"
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.cohort"),
    },
    Case {
        rule: "CQ-02c",
        kueue: "a2/clusterqueue_types.go:61",
        kueue_test: r#"IT-CQ:305 "with valid cohort""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  cohortName: prod
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Accept,
    },
    Case {
        rule: "CQ-04",
        kueue: "a2/clusterqueue_types.go:261",
        kueue_test: r#"IT-CQ:231 "Should have at least one flavor""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: []
    flavors: []
"#,
        expect: Refuse("spec.resourceGroups[0].coveredResources"),
    },
    Case {
        rule: "CQ-06",
        kueue: "a2/clusterqueue_types.go:346",
        kueue_test: r#"IT-CQ:239 "Should have qualified flavor name""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: invalid_name
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.resourceGroups[0].flavors[0].name"),
    },
    Case {
        rule: "CQ-07",
        kueue: "a2/clusterqueue_types.go:292",
        kueue_test: r#"IT-CQ:234 "Should have at least one resource""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: []
"#,
        expect: Refuse("spec.resourceGroups[0].flavors[0].resources"),
    },
    Case {
        rule: "CQ-08",
        kueue: "a2/clusterqueue_types.go:300",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu}
"#,
        expect: Refuse("spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"),
    },
    Case {
        rule: "CQ-09",
        kueue: "a2/clusterqueue_types.go:254 (CEL)",
        kueue_test: r#"IT-CQ:424 "Should forbid to create clusterQueue missing resources in a flavor""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.resourceGroups[0].flavors[0].resources"),
    },
    Case {
        rule: "CQ-10",
        kueue: "a2/clusterqueue_types.go:66 (CEL)",
        kueue_test: r#"IT-CQ:352 "with flavor quota with borrowingLimit and empty cohort""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1, borrowingLimit: 1}
"#,
        expect: Refuse("spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit"),
    },
    Case {
        rule: "CQ-11",
        kueue: "a2/clusterqueue_types.go:105",
        kueue_test: r#"IT-CQ:274 "unknown clusterQueueingStrategy""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  queueingStrategy: unknown
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.queueingStrategy"),
    },
    Case {
        rule: "CQ-11b",
        kueue: "a2/clusterqueue_types.go:105",
        kueue_test: "UT-CQ:180 (StrictFIFO)",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  queueingStrategy: StrictFIFO
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Accept,
    },
    Case {
        rule: "CQ-12",
        kueue: "a2/clusterqueue_types.go:141",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  stopPolicy: Pause
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.stopPolicy"),
    },
    Case {
        rule: "CQ-12b",
        kueue: "a2/clusterqueue_types.go:141",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  stopPolicy: Hold
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Accept,
    },
    Case {
        rule: "CQ-13",
        kueue: "a2/clusterqueue_types.go:464 (v1beta2 enum)",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  flavorFungibility: {whenCanBorrow: Borrow}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.flavorFungibility.whenCanBorrow"),
    },
    Case {
        rule: "CQ-13b",
        kueue: "a1/clusterqueue_types.go:412 (v1beta1 enum)",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  flavorFungibility: {whenCanBorrow: Borrow}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Accept,
    },
    Case {
        rule: "CQ-13c",
        kueue: "a2/clusterqueue_types.go:464",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  flavorFungibility: {whenCanBorrow: MayStopSearch, whenCanPreempt: TryNextFlavor}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Accept,
    },
    Case {
        rule: "CQ-14",
        kueue: "a2/clusterqueue_types.go:476 (v1beta2 enum)",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  flavorFungibility: {whenCanPreempt: Preempt}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.flavorFungibility.whenCanPreempt"),
    },
    Case {
        rule: "CQ-14b",
        kueue: "a1/clusterqueue_types.go:424 (v1beta1 enum)",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  flavorFungibility: {whenCanPreempt: Preempt}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Accept,
    },
    Case {
        rule: "CQ-15",
        kueue: "a2/clusterqueue_types.go:491",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor, preference: Cheapest}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.flavorFungibility.preference"),
    },
    Case {
        rule: "CQ-16",
        kueue: "a2/clusterqueue_types.go:455 (CEL)",
        kueue_test: r#"UT-CQ:326 "preference set but whenCanPreempt != TryNextFlavor""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: MayStopSearch, preference: BorrowingOverPreemption}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.flavorFungibility.preference"),
    },
    Case {
        rule: "CQ-17",
        kueue: "a2/clusterqueue_types.go:535",
        kueue_test: r#"IT-CQ:289 "unknown preemption.withinCohort""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  preemption: {reclaimWithinCohort: unknown}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.preemption.reclaimWithinCohort"),
    },
    Case {
        rule: "CQ-18",
        kueue: "a2/clusterqueue_types.go:557",
        kueue_test: r#"IT-CQ:292 "unknown preemption.withinClusterQueue""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  preemption: {withinClusterQueue: Any}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.preemption.withinClusterQueue"),
    },
    Case {
        rule: "CQ-19",
        kueue: "a2/clusterqueue_types.go:582",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  preemption: {reclaimWithinCohort: Any, borrowWithinCohort: {policy: Any}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.preemption.borrowWithinCohort.policy"),
    },
    Case {
        rule: "CQ-20",
        kueue: "a2/clusterqueue_types.go:516 (CEL)",
        kueue_test: r#"IT-CQ:509 "invalid preemption due to reclaimWithinCohort=Never, while borrowWithinCohort!=nil""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  preemption: {reclaimWithinCohort: Never, borrowWithinCohort: {policy: LowerPriority}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.preemption.borrowWithinCohort.policy"),
    },
    Case {
        rule: "CQ-20b",
        kueue: "a2/clusterqueue_types.go:516",
        kueue_test: r#"UT-CQ:296 "valid preemption with borrowWithinCohort""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  preemption: {reclaimWithinCohort: Any, borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 10}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Accept,
    },
    Case {
        rule: "CQ-28",
        kueue: "wh/clusterqueue_webhook.go:122",
        kueue_test: r#"UT-CQ:186 "namespaceSelector with invalid labels""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {matchLabels: {"nospecialchars^=@": bar}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse(r#"spec.namespaceSelector.matchLabels["nospecialchars^=@"]"#),
    },
    Case {
        rule: "CQ-28b",
        kueue: "wh/clusterqueue_webhook.go:122",
        kueue_test: r#"UT-CQ:196 "namespaceSelector with invalid expressions""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {matchExpressions: [{key: key, operator: In}]}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.namespaceSelector.matchExpressions[0].values"),
    },
    Case {
        rule: "CQ-29",
        kueue: "wh/common.go:29",
        kueue_test: r#"UT-CQ:54 "invalid resource name""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: ["@cpu"]
    flavors:
    - name: default
      resources:
      - {name: "@cpu", nominalQuota: 1}
"#,
        expect: Refuse("spec.resourceGroups[0].coveredResources[0]"),
    },
    Case {
        rule: "CQ-30",
        kueue: "wh/clusterqueue_webhook.go:312",
        kueue_test: r#"UT-CQ:262 "resource in more than one resource group""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
  - coveredResources: [cpu]
    flavors:
    - name: alpha
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.resourceGroups[1].coveredResources[0]"),
    },
    Case {
        rule: "CQ-31",
        kueue: "wh/clusterqueue_webhook.go:321",
        kueue_test: r#"UT-CQ:281 "flavor in more than one resource group""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
  - coveredResources: [memory]
    flavors:
    - name: default
      resources:
      - {name: memory, nominalQuota: 1}
"#,
        expect: Refuse("spec.resourceGroups[1].flavors[0].name"),
    },
    Case {
        rule: "CQ-32",
        kueue: "wh/clusterqueue_webhook.go:339",
        kueue_test: r#"UT-CQ:233 "resources in a flavor in different order""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - {name: memory, nominalQuota: 1}
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.resourceGroups[0].flavors[0].resources[0].name"),
    },
    Case {
        rule: "CQ-32b",
        kueue: "wh/clusterqueue_webhook.go:339",
        kueue_test: r#"UT-CQ:210 "multiple resource groups""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
  - coveredResources: [memory]
    flavors:
    - name: alpha
      resources:
      - {name: memory, nominalQuota: 1}
"#,
        expect: Accept,
    },
    Case {
        rule: "CQ-33",
        kueue: "wh/clusterqueue_webhook.go:342",
        kueue_test: r#"UT-CQ:104 "flavor quota with negative value""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "-1"}
"#,
        expect: Refuse("spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"),
    },
    Case {
        rule: "CQ-33b",
        kueue: "wh/clusterqueue_webhook.go:342",
        kueue_test: "UT-CQ:114 (0)",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 0}
"#,
        expect: Accept,
    },
    Case {
        rule: "CQ-34",
        kueue: "wh/clusterqueue_webhook.go:343",
        kueue_test: r#"UT-CQ:129 "flavor quota with negative borrowingLimit""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  cohortName: pool
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1, borrowingLimit: "-1"}
"#,
        expect: Refuse("spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit"),
    },
    Case {
        rule: "CQ-34b",
        kueue: "wh/clusterqueue_webhook.go:343",
        kueue_test: "UT-CQ:121 (0)",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  cohortName: pool
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1, borrowingLimit: 0}
"#,
        expect: Accept,
    },
    Case {
        rule: "CQ-36",
        kueue: "wh/clusterqueue_webhook.go:350",
        kueue_test: r#"UT-CQ:148 "flavor quota with negative lendingLimit""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  cohortName: pool
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1, lendingLimit: "-1"}
"#,
        expect: Refuse("spec.resourceGroups[0].flavors[0].resources[0].lendingLimit"),
    },
    Case {
        rule: "CQ-36b",
        kueue: "wh/clusterqueue_webhook.go:350",
        kueue_test: "UT-CQ:140 (0)",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  cohortName: pool
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1, lendingLimit: 0}
"#,
        expect: Accept,
    },
    Case {
        rule: "CQ-37",
        kueue: "wh/clusterqueue_webhook.go:351",
        kueue_test: r#"UT-CQ:159 "flavor quota with lendingLimit and empty cohort""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1, lendingLimit: 1}
"#,
        expect: Refuse("spec.resourceGroups[0].flavors[0].resources[0].lendingLimit"),
    },
    Case {
        rule: "CQ-38",
        kueue: "wh/clusterqueue_webhook.go:352",
        kueue_test: r#"UT-CQ:169 "flavor quota with lendingLimit greater than nominalQuota""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  cohortName: pool
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1, lendingLimit: 2}
"#,
        expect: Refuse("spec.resourceGroups[0].flavors[0].resources[0].lendingLimit"),
    },
    Case {
        rule: "CQ-41",
        kueue: "wh/common.go:50",
        kueue_test: r#"IT-CQ:641 "Should forbid negative FairSharing weight""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  fairSharing: {weight: "-1"}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.fairSharing.weight"),
    },
    Case {
        rule: "CQ-41b",
        kueue: "wh/common.go:50",
        kueue_test: "IT-CQ:564 (0.1)",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  fairSharing: {weight: "0.1"}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Accept,
    },
    Case {
        rule: "CQ-42",
        kueue: "wh/common.go:56",
        kueue_test: r#"IT-CQ:615 "Should forbid threshold FairSharing weight""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  fairSharing: {weight: 1n}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.fairSharing.weight"),
    },
    Case {
        rule: "CQ-42b",
        kueue: "wh/common.go:56",
        kueue_test: r#"IT-CQ:628 "collapsed""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  fairSharing: {weight: "1e-10"}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.fairSharing.weight"),
    },
    Case {
        rule: "CQ-42c",
        kueue: "wh/common.go:56",
        kueue_test: "IT-CQ:602 (2n)",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  fairSharing: {weight: 2n}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Accept,
    },
    Case {
        rule: "CQ-25",
        kueue: "a2/fairsharing_types.go:61 (v1beta2 enum)",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  admissionScope: {admissionMode: Sometimes}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.admissionScope.admissionMode"),
    },
    Case {
        rule: "CQ-25b",
        kueue: "a2/fairsharing_types.go:61",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Accept,
    },
    Case {
        rule: "LQ-01",
        kueue: "apiserver",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: Team_A}
spec:
  clusterQueue: cq
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("metadata.name"),
    },
    Case {
        rule: "LQ-02",
        kueue: "a2/localqueue_types.go:37",
        kueue_test: r#"IT-LQ:45 "Should reject bad value for spec.clusterQueue""#,
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: lq}
spec:
  clusterQueue: invalid_name
"#,
        expect: Refuse("spec.clusterQueue"),
    },
    Case {
        rule: "LQ-04",
        kueue: "a2/localqueue_types.go:49",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: lq}
spec:
  clusterQueue: cq
  stopPolicy: Drain
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.stopPolicy"),
    },
    Case {
        rule: "LQ-04b",
        kueue: "a2/localqueue_types.go:49",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: lq}
spec:
  clusterQueue: cq
  stopPolicy: Hold
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Accept,
    },
    Case {
        rule: "LQ-05",
        kueue: "a2/fairsharing_types.go:37",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: lq}
spec:
  clusterQueue: cq
  fairSharing: {weight: abc}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Refuse("spec.fairSharing.weight"),
    },
    Case {
        rule: "WPC-01",
        kueue: "apiserver",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: High_Prio}
value: 1
"#,
        expect: Refuse("metadata.name"),
    },
    Case {
        rule: "WPC-02",
        kueue: "a2/workloadpriorityclass_types.go:40 (value required)",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
description: x
"#,
        expect: Refuse("value"),
    },
    Case {
        rule: "WPC-02b",
        kueue: "a2/workloadpriorityclass_types.go:40 (int32)",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 3000000000
"#,
        expect: Refuse("value"),
    },
    Case {
        rule: "WPC-02c",
        kueue: "a2/workloadpriorityclass_types.go:40 (no range check)",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: -2000000000
"#,
        expect: Accept,
    },
    Case {
        rule: "WPC-03",
        kueue: "a2/workloadpriorityclass_types.go:46 (maxLength 2048)",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1
description: ddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd
"#,
        expect: Refuse("description"),
    },
    Case {
        rule: "WPC-03b",
        kueue: "a1 (no maxLength in v1beta1)",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1
description: ddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd
"#,
        expect: Accept,
    },
];

#[test]
fn configuration_kinds_validate_as_kueue_does() {
    run(BASE, CASES);
}

/// What Kueue accepts and fleetq refuses on purpose, each with "not
/// supported by fleetq" and its reason (docs/kueue-conformance.md,
/// "Refused on purpose").
const FLEETQ_DEPARTURES: &[Case] = &[
    Case {
        rule: "CQ-16b",
        kueue: "a2/clusterqueue_types.go:455",
        kueue_test: "UT-CQ:354",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: TryNextFlavor, preference: PreemptionOverBorrowing}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Accept,
    },
    Case {
        rule: "CQ-24",
        kueue: "a1/clusterqueue_types.go:115",
        kueue_test: "UT-CQ:63 \"admissionChecks defined\"",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq}
spec:
  admissionChecks: [prov]
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Accept,
    },
    Case {
        rule: "CQ-12c",
        kueue: "a2/clusterqueue_types.go:141",
        kueue_test: "none",
        yaml: r#"apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  stopPolicy: HoldAndDrain
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: 1}
"#,
        expect: Accept,
    },
];

#[test]
fn departures_are_refused_as_not_supported() {
    for case in FLEETQ_DEPARTURES {
        assert_eq!(
            case.expect, Accept,
            "{}: a departure is what Kueue accepts",
            case.rule
        );
        let errors = errors(BASE, case.yaml);
        assert!(
            !errors.is_empty()
                && errors
                    .iter()
                    .all(|e| e.message.contains("not supported by fleetq")),
            "{}: {errors:?}",
            case.rule
        );
    }
}

/// A ResourceFlavor with `n` node labels, taints and tolerations each.
fn flavor_with(n: usize) -> String {
    let labels: Vec<String> = (0..n).map(|i| format!("l{i}: v")).collect();
    let taints: Vec<String> = (0..n)
        .map(|i| format!("{{key: t{i}, effect: NoSchedule}}"))
        .collect();
    let tolerations: Vec<String> = (0..n)
        .map(|i| format!("{{key: t{i}, operator: Exists}}"))
        .collect();
    format!(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {{name: many}}\nspec:\n  nodeLabels: {{{}}}\n  nodeTaints: [{}]\n  tolerations: [{}]\n",
        labels.join(", "),
        taints.join(", "),
        tolerations.join(", ")
    )
}

/// A ClusterQueue of `groups` resource groups, each covering `resources`
/// resources in `flavors` flavors (flavor and resource names unique over
/// the queue, as Kueue requires).
fn queue_with(groups: usize, flavors: usize, resources: usize) -> String {
    let mut s = String::new();
    // fleetq refuses a flavor without a ResourceFlavor (docs: "Rules
    // fleetq adds"), so the queue's flavors come with it.
    for g in 0..groups {
        for f in 0..flavors {
            s += &format!(
                "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {{name: f{g}-{f}}}\n---\n"
            );
        }
    }
    s += "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: big}\nspec:\n  resourceGroups:\n";
    for g in 0..groups {
        let names: Vec<String> = (0..resources)
            .map(|r| format!("example.com/r{g}-{r}"))
            .collect();
        s += &format!(
            "  - coveredResources: [{}]\n    flavors:\n",
            names.join(", ")
        );
        for f in 0..flavors {
            s += &format!("    - name: f{g}-{f}\n      resources:\n");
            for name in &names {
                s += &format!("      - {{name: {name}, nominalQuota: 1}}\n");
            }
        }
    }
    s
}

/// The size limits of Kueue's CRD schema and webhooks, at the limit
/// (accepted) and one above (refused at the field Kueue names).
#[test]
fn size_limits_are_kueues() {
    let paths =
        |yaml: &str| -> Vec<String> { errors(BASE, yaml).into_iter().map(|e| e.path).collect() };
    // RF-02, RF-04, RF-10: 8 node labels, taints and tolerations.
    assert!(
        paths(&flavor_with(8)).is_empty(),
        "{:?}",
        paths(&flavor_with(8))
    );
    let refused = paths(&flavor_with(9));
    for field in ["spec.nodeLabels", "spec.nodeTaints", "spec.tolerations"] {
        assert!(refused.iter().any(|p| p == field), "{field}: {refused:?}");
    }
    // CQ-03: 16 resource groups.
    assert!(paths(&queue_with(16, 1, 1)).is_empty());
    assert!(paths(&queue_with(17, 1, 1)).contains(&"spec.resourceGroups".to_string()));
    // CQ-05, CQ-04 and CQ-07: 64 flavors, covered resources and
    // resources per flavor.
    assert!(paths(&queue_with(1, 64, 1)).is_empty());
    assert!(paths(&queue_with(1, 65, 1)).contains(&"spec.resourceGroups[0].flavors".to_string()));
    assert!(paths(&queue_with(1, 1, 64)).is_empty());
    let refused = paths(&queue_with(1, 1, 65));
    assert!(
        refused.contains(&"spec.resourceGroups[0].coveredResources".to_string()),
        "{refused:?}"
    );
    // CQ-43: 256 flavors over all groups; CQ-44: 256 covered resources.
    assert!(paths(&queue_with(4, 64, 1)).is_empty());
    let refused = paths(&queue_with(5, 52, 1));
    assert!(
        refused.contains(&"spec.resourceGroups".to_string()),
        "{refused:?}"
    );
    assert!(paths(&queue_with(4, 1, 64)).is_empty());
    let refused = paths(&queue_with(5, 1, 52));
    assert!(
        refused.contains(&"spec.resourceGroups".to_string()),
        "{refused:?}"
    );
    // CQ-45: 512 flavor x resource cells in one group.
    assert!(paths(&queue_with(1, 8, 64)).is_empty());
    let refused = paths(&queue_with(1, 9, 57));
    assert!(
        refused.contains(&"spec.resourceGroups[0]".to_string()),
        "{refused:?}"
    );
}
