import Testing
@testable import PushWorker

@Suite("PUSH_RDKAFKA_* settings that weaken broker authentication, load outside code or break the delivery contract")
struct UnsafeKafkaPropertyTests {
    let minimal = ["PUSH_KAFKA_BROKERS": "k1:9092", "PUSH_PROXY_URL": "https://proxy.example.com/push"]
    let unsafe = [
        "PUSH_RDKAFKA_ENABLE_SSL_CERTIFICATE_VERIFICATION": "false",
        "PUSH_RDKAFKA_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM": "none",
        "PUSH_RDKAFKA_ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT": "true",
        "PUSH_RDKAFKA_PLUGIN_LIBRARY_PATHS": "/tmp/monitoring-interceptor.so",
        "PUSH_RDKAFKA_SSL_ENGINE_LOCATION": "/tmp/engine.so",
        "PUSH_RDKAFKA_SASL_KERBEROS_KINIT_CMD": "kinit -k push-worker",
    ]

    @Test("each unsafe librdkafka setting stops start-up with its own line")
    func eachUnsafeSettingIsRefused() {
        #expect(
            problems(minimal.merging(unsafe) { $1 }) == [
                "PUSH_RDKAFKA_ENABLE_SSL_CERTIFICATE_VERIFICATION=false turns off verification of the brokers' TLS certificates; refused unless PUSH_RDKAFKA_ALLOW_UNSAFE=true",
                "PUSH_RDKAFKA_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM=none turns off the check that a broker's certificate names its host; refused unless PUSH_RDKAFKA_ALLOW_UNSAFE=true",
                "PUSH_RDKAFKA_ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT=true authenticates with librdkafka's unsigned test tokens (for development only); refused unless PUSH_RDKAFKA_ALLOW_UNSAFE=true",
                "PUSH_RDKAFKA_PLUGIN_LIBRARY_PATHS is set: it loads shared libraries into the worker; refused unless PUSH_RDKAFKA_ALLOW_UNSAFE=true",
                "PUSH_RDKAFKA_SSL_ENGINE_LOCATION is set: it loads an OpenSSL engine library into the worker; refused unless PUSH_RDKAFKA_ALLOW_UNSAFE=true",
                "PUSH_RDKAFKA_SASL_KERBEROS_KINIT_CMD is set: it runs a shell command of its own; refused unless PUSH_RDKAFKA_ALLOW_UNSAFE=true",
            ])
    }

    @Test("every spelling librdkafka reads as the unsafe value is refused: booleans 0, f, FALSE; enum values in any case")
    func librdkafkaSpellingsAreRefused() {
        for spelling in ["0", "f", "FALSE", " false "] {
            #expect(problems(minimal.merging(["PUSH_RDKAFKA_ENABLE_SSL_CERTIFICATE_VERIFICATION": spelling]) { $1 }).count == 1)
        }
        for spelling in ["1", "t", "TRUE"] {
            #expect(problems(minimal.merging(["PUSH_RDKAFKA_ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT": spelling]) { $1 }).count == 1)
        }
        #expect(problems(minimal.merging(["PUSH_RDKAFKA_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM": "None"]) { $1 }).count == 1)
    }

    @Test("the safe values of the same properties pass through")
    func safeValuesPass() throws {
        let configuration = try WorkerConfiguration.load(
            from: minimal.merging([
                "PUSH_RDKAFKA_ENABLE_SSL_CERTIFICATE_VERIFICATION": "true",
                "PUSH_RDKAFKA_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM": "https",
                "PUSH_RDKAFKA_ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT": "false",
            ]) { $1 }
        ).get()
        #expect(configuration.rdkafkaProperties["ssl.endpoint.identification.algorithm"] == "https")
        #expect(configuration.allowedUnsafeKafkaSettings.isEmpty)
    }

    @Test(
        "PUSH_RDKAFKA_ALLOW_UNSAFE=true lets them through to librdkafka, lists them for a warning, and is not a librdkafka property itself")
    func allowSwitch() throws {
        let configuration = try WorkerConfiguration.load(
            from: minimal.merging(unsafe) { $1 }
                .merging(["PUSH_RDKAFKA_ALLOW_UNSAFE": "true"]) { $1 }
        ).get()
        #expect(
            configuration.rdkafkaProperties == [
                "enable.ssl.certificate.verification": "false",
                "ssl.endpoint.identification.algorithm": "none",
                "enable.sasl.oauthbearer.unsecure.jwt": "true",
                "plugin.library.paths": "/tmp/monitoring-interceptor.so",
                "ssl.engine.location": "/tmp/engine.so",
                "sasl.kerberos.kinit.cmd": "kinit -k push-worker",
            ])
        #expect(configuration.allowedUnsafeKafkaSettings.count == 6)
        #expect(
            configuration.allowedUnsafeKafkaSettings.first
                == "PUSH_RDKAFKA_ENABLE_SSL_CERTIFICATE_VERIFICATION=false turns off verification of the brokers' TLS certificates")
    }

    @Test(
        "each setting that breaks commit-after-acknowledgement, acks=all or no-skipped-jobs stops start-up with its own line saying what breaks"
    )
    func deliveryContractSettingsAreRefused() {
        let refused = problems(
            minimal.merging([
                "PUSH_RDKAFKA_ACKS": "1",
                "PUSH_RDKAFKA_REQUEST_REQUIRED_ACKS": "0",
                "PUSH_RDKAFKA_ENABLE_IDEMPOTENCE": "false",
                "PUSH_RDKAFKA_ENABLE_AUTO_COMMIT": "false",
                "PUSH_RDKAFKA_AUTO_COMMIT_INTERVAL_MS": "0",
                "PUSH_RDKAFKA_AUTO_OFFSET_RESET": "latest",
                "PUSH_RDKAFKA_ISOLATION_LEVEL": "read_uncommitted",
            ]) { $1 })
        let acks =
            "lets a broker acknowledge an outcome before every in-sync replica has it: the job's offset can be committed for an outcome a broker failure then loses; refused unless PUSH_RDKAFKA_ALLOW_UNSAFE=true"
        let commits =
            "stops the periodic commit of finished jobs' offsets: they are committed only on a rebalance or shutdown, so a crash redelivers every job since; refused unless PUSH_RDKAFKA_ALLOW_UNSAFE=true"
        #expect(
            refused == [
                "PUSH_RDKAFKA_ACKS=1 " + acks,
                "PUSH_RDKAFKA_REQUEST_REQUIRED_ACKS=0 " + acks,
                "PUSH_RDKAFKA_ENABLE_IDEMPOTENCE=false turns off the idempotent outcome producer: a batch resent after a broker error can be written twice or out of order, and acks=all is no longer enforced; refused unless PUSH_RDKAFKA_ALLOW_UNSAFE=true",
                "PUSH_RDKAFKA_ENABLE_AUTO_COMMIT=false " + commits,
                "PUSH_RDKAFKA_AUTO_COMMIT_INTERVAL_MS=0 " + commits,
                "PUSH_RDKAFKA_AUTO_OFFSET_RESET=latest starts a new consumer group, or a partition whose committed offset the topic no longer holds, at its end: the jobs before it are never delivered; refused unless PUSH_RDKAFKA_ALLOW_UNSAFE=true",
                "PUSH_RDKAFKA_ISOLATION_LEVEL=read_uncommitted reads jobs of transactions their producer aborted: pushes it took back are sent; refused unless PUSH_RDKAFKA_ALLOW_UNSAFE=true",
            ])
    }

    @Test(
        "the spellings librdkafka reads as the same unsafe value are refused (acks 2 or 0, the reset aliases largest and end); all, -1 and earliest pass"
    )
    func deliveryContractSpellings() throws {
        for spelling in ["2", "0", " 1 "] { #expect(problems(minimal.merging(["PUSH_RDKAFKA_ACKS": spelling]) { $1 }).count == 1) }
        for spelling in ["largest", "END", "Latest"] {
            #expect(problems(minimal.merging(["PUSH_RDKAFKA_AUTO_OFFSET_RESET": spelling]) { $1 }).count == 1)
        }
        let configuration = try WorkerConfiguration.load(
            from: minimal.merging([
                "PUSH_RDKAFKA_ACKS": "ALL", "PUSH_RDKAFKA_REQUEST_REQUIRED_ACKS": "-1", "PUSH_RDKAFKA_ENABLE_IDEMPOTENCE": "true",
                "PUSH_RDKAFKA_ENABLE_AUTO_COMMIT": "true", "PUSH_RDKAFKA_AUTO_COMMIT_INTERVAL_MS": "500",
                "PUSH_RDKAFKA_AUTO_OFFSET_RESET": "earliest", "PUSH_RDKAFKA_ISOLATION_LEVEL": "read_committed",
            ]) { $1 }
        ).get()
        #expect(configuration.allowedUnsafeKafkaSettings.isEmpty)
        #expect(configuration.rdkafkaProperties["auto.commit.interval.ms"] == "500")
    }

    @Test(
        "an infinite outcome timeout (message.timeout.ms or its alias delivery.timeout.ms = 0) is refused: its delivery reports never come"
    )
    func infiniteOutcomeTimeoutIsRefused() throws {
        let never =
            "waits for the brokers' acknowledgement of an outcome without end: its delivery report never comes, so a publish that cannot complete is never reported, logged or retried, and its job's offset is never committed; refused unless PUSH_RDKAFKA_ALLOW_UNSAFE=true"
        #expect(
            problems(minimal.merging(["PUSH_RDKAFKA_MESSAGE_TIMEOUT_MS": "0"]) { $1 }) == ["PUSH_RDKAFKA_MESSAGE_TIMEOUT_MS=0 " + never])
        #expect(
            problems(minimal.merging(["PUSH_RDKAFKA_DELIVERY_TIMEOUT_MS": "0"]) { $1 }) == ["PUSH_RDKAFKA_DELIVERY_TIMEOUT_MS=0 " + never])
        // librdkafka reads integers with strtol (base 0) and keeps a C int: each of these is 0 to it.
        for spelling in [" 00 ", "0x0", "-0", "0ms", "-99999999999999999999", "4294967296"] {
            #expect(problems(minimal.merging(["PUSH_RDKAFKA_DELIVERY_TIMEOUT_MS": spelling]) { $1 }).count == 1, "\(spelling)")
        }
        let configuration = try WorkerConfiguration.load(
            from: minimal.merging(["PUSH_RDKAFKA_MESSAGE_TIMEOUT_MS": "30000"]) { $1 }
        ).get()
        #expect(configuration.rdkafkaProperties["message.timeout.ms"] == "30000")
        #expect(configuration.allowedUnsafeKafkaSettings.isEmpty)
    }

    @Test(
        "a periodic commit slower than 10 s is refused: a crash could redeliver finished jobs after their idempotency records expired; 10 s passes"
    )
    func slowPeriodicCommitIsRefused() throws {
        #expect(
            problems(minimal.merging(["PUSH_RDKAFKA_AUTO_COMMIT_INTERVAL_MS": "60000"]) { $1 }) == [
                "PUSH_RDKAFKA_AUTO_COMMIT_INTERVAL_MS=60000 commits finished jobs' offsets less often than every 10000 ms: after a crash the jobs finished since the last commit come back once the session times out (45 s by default), and past 10 s they can come back after the shortest PUSH_IDEMPOTENCY_TTL_S (60 s) has forgotten them, so they are sent twice; refused unless PUSH_RDKAFKA_ALLOW_UNSAFE=true"
            ])
        #expect(problems(minimal.merging(["PUSH_RDKAFKA_AUTO_COMMIT_INTERVAL_MS": "86400000"]) { $1 }).count == 1)
        // librdkafka reads integers with strtol (base 0) and keeps a C int: these are 0, 10001 and 60000 to it.
        for spelling in ["00", "0x2711", "4294967296060000"] {
            #expect(problems(minimal.merging(["PUSH_RDKAFKA_AUTO_COMMIT_INTERVAL_MS": spelling]) { $1 }).count == 1, "\(spelling)")
        }
        let configuration = try WorkerConfiguration.load(
            from: minimal.merging(["PUSH_RDKAFKA_AUTO_COMMIT_INTERVAL_MS": "10000"]) { $1 }
        ).get()
        #expect(configuration.rdkafkaProperties["auto.commit.interval.ms"] == "10000")
    }

    @Test(
        "librdkafka's other name for the brokers, metadata.broker.list, is refused like bootstrap.servers, even with PUSH_RDKAFKA_ALLOW_UNSAFE=true"
    )
    func brokerListAliasIsManaged() {
        let expected = [
            "PUSH_RDKAFKA_METADATA_BROKER_LIST cannot be overridden: it is librdkafka's other name for bootstrap.servers, which PUSH_KAFKA_BROKERS sets"
        ]
        #expect(problems(minimal.merging(["PUSH_RDKAFKA_METADATA_BROKER_LIST": "attacker:9092"]) { $1 }) == expected)
        #expect(
            problems(minimal.merging(["PUSH_RDKAFKA_METADATA_BROKER_LIST": "k2:9092", "PUSH_RDKAFKA_ALLOW_UNSAFE": "true"]) { $1 })
                == expected)
        #expect(
            problems(minimal.merging(["PUSH_RDKAFKA_BOOTSTRAP_SERVERS": "k2:9092"]) { $1 })
                == ["PUSH_RDKAFKA_BOOTSTRAP_SERVERS cannot be overridden: PUSH_KAFKA_BROKERS sets it"])
    }

    @Test("PUSH_RDKAFKA_ALLOW_UNSAFE must be true or false; false refuses as if unset")
    func allowSwitchValues() {
        #expect(
            problems(minimal.merging(["PUSH_RDKAFKA_ALLOW_UNSAFE": "sure"]) { $1 })
                == ["PUSH_RDKAFKA_ALLOW_UNSAFE must be true or false, got \"sure\""])
        #expect(
            problems(minimal.merging(["PUSH_RDKAFKA_ALLOW_UNSAFE": "false", "PUSH_RDKAFKA_SSL_ENGINE_LOCATION": "/x.so"]) { $1 })
                == [
                    "PUSH_RDKAFKA_SSL_ENGINE_LOCATION is set: it loads an OpenSSL engine library into the worker; refused unless PUSH_RDKAFKA_ALLOW_UNSAFE=true"
                ])
    }
}
