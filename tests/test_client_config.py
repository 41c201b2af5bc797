"""--command-config: a Java client properties file for both Kafka client libraries."""

import pytest

from engine.kafka.client_config import ClientConfig, ClientConfigError


def load(tmp_path, text):
    p = tmp_path / "client.properties"
    p.write_text(text)
    return ClientConfig.load(str(p))


def test_sasl_ssl_file_maps_to_both_clients(tmp_path):
    c = load(tmp_path, """# operator's file
bootstrap.servers=k1:9093,k2:9093
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
    username="ops" password="p=w";
ssl.truststore.type=PEM
ssl.truststore.location=/etc/kafka/ca.pem
ssl.endpoint.identification.algorithm=
request.timeout.ms=15000
""")
    assert c.confluent() == {
        "bootstrap.servers": "k1:9093,k2:9093", "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "ops", "sasl.password": "p=w",
        "ssl.ca.location": "/etc/kafka/ca.pem", "ssl.endpoint.identification.algorithm": "none",
    }
    assert c.kafka_python() == {
        "bootstrap_servers": ["k1:9093", "k2:9093"], "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "ops", "sasl_plain_password": "p=w",
        "ssl_cafile": "/etc/kafka/ca.pem", "ssl_check_hostname": False, "request_timeout_ms": 15000,
    }


def test_bootstrap_flag_overrides_the_file(tmp_path):
    c = load(tmp_path, "bootstrap.servers=a:1\n").with_bootstrap("b:2")
    assert c.confluent()["bootstrap.servers"] == "b:2" and c.kafka_python()["bootstrap_servers"] == ["b:2"]


@pytest.mark.parametrize("text, message", [
    ("ssl.truststore.location=/x.jks\n", "JKS stores are Java-only"),
    ("sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;\n",
     "Krb5LoginModule is not supported"),
])
def test_unsupported_properties_are_named(tmp_path, text, message):
    with pytest.raises(ClientConfigError, match=message):
        load(tmp_path, text)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(ClientConfigError, match="nope.properties: No such file"):
        ClientConfig.load(str(tmp_path / "nope.properties"))
