"""The event log on real Apache Kafka (testcontainers): the default profile, no tansu accommodation."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from engine.kafka.broker_profile import KAFKA
from engine.kafka.client_config import ClientConfig
from engine.log.eventlog import EventWriter, Publisher
from engine.log.replay import replay
from engine.kafka.topics import EVENTS, Topics, create
from tests.real_kafka import real_kafka
from tests.test_eventlog import story

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def kafka():
    with real_kafka() as bootstrap:
        yield bootstrap


def test_topics_publish_and_replay_on_real_kafka(kafka):
    conf = {"bootstrap.servers": kafka}
    assert {what for _n, what in create(conf, "real.")} == {"created"}
    assert {what for _n, what in create(conf, "real.")} == {"exists"}
    admin = AdminClient(conf)
    resource = ConfigResource(ConfigResource.Type.TOPIC, Topics.named("real.").events)
    configs = admin.describe_configs([resource])[resource].result()
    assert {k: configs[k].value for k in EVENTS.config} == dict(EVENTS.config)
    config = ClientConfig().with_bootstrap(kafka)
    d = story()
    with EventWriter(config=config, prefix="real.", profile=KAFKA) as writer:
        writer.append(d.events)
    with Publisher(config=config, prefix="real.", profile=KAFKA) as publisher:
        publisher.pause()
    assert replay(config, prefix="real.", profile=KAFKA).state == d.state
