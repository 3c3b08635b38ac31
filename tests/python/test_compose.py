"""docker-compose.yml parses, and names only services and images this repository builds."""

import os
import re

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def dockerfile_stages():
    with open(os.path.join(ROOT, "Dockerfile")) as f:
        return set(re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", f.read(), flags=re.M | re.I))


def test_compose_services_are_built_here():
    with open(os.path.join(ROOT, "docker-compose.yml")) as f:
        compose = yaml.safe_load(f)
    services = compose["services"]
    assert set(services) == {"broker", "follower-2", "follower-3", "producer"}
    stages = dockerfile_stages()
    for name, service in services.items():
        assert "image" not in service, f"{name} must be built from this repository, not pulled"
        build = service["build"]
        assert build["context"] == "."
        assert build["dockerfile"] == "Dockerfile"
        assert build["target"] in stages, f"{name} builds unknown stage {build['target']}"
        for dep in service.get("depends_on", []):
            assert dep in services, f"{name} depends on unknown service {dep}"


def test_followers_point_at_the_broker_with_their_replica_ids():
    with open(os.path.join(ROOT, "docker-compose.yml")) as f:
        services = yaml.safe_load(f)["services"]
    assert "--no-embedded-followers" in services["broker"]["command"]
    for replica_id in (2, 3):
        command = services[f"follower-{replica_id}"]["command"]
        assert command[command.index("--bootstrap") + 1] == "broker:9092"
        assert command[command.index("--replica-ids") + 1] == str(replica_id)
