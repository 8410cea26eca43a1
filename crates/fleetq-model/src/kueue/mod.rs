//! Import of Kueue manifests (multi-document YAML) into fleetq objects.
