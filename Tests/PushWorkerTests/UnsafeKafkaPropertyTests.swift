import Testing
@testable import PushWorker

@Suite("PUSH_RDKAFKA_* settings that weaken broker authentication or load outside code")
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
        #expect(problems(minimal.merging(unsafe) { $1 }) == [
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
        let configuration = try WorkerConfiguration.load(from: minimal.merging([
            "PUSH_RDKAFKA_ENABLE_SSL_CERTIFICATE_VERIFICATION": "true",
            "PUSH_RDKAFKA_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM": "https",
            "PUSH_RDKAFKA_ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT": "false",
        ]) { $1 }).get()
        #expect(configuration.rdkafkaProperties["ssl.endpoint.identification.algorithm"] == "https")
        #expect(configuration.allowedUnsafeKafkaSettings.isEmpty)
    }

    @Test("PUSH_RDKAFKA_ALLOW_UNSAFE=true lets them through to librdkafka, lists them for a warning, and is not a librdkafka property itself")
    func allowSwitch() throws {
        let configuration = try WorkerConfiguration.load(from: minimal.merging(unsafe) { $1 }
            .merging(["PUSH_RDKAFKA_ALLOW_UNSAFE": "true"]) { $1 }).get()
        #expect(configuration.rdkafkaProperties == [
            "enable.ssl.certificate.verification": "false",
            "ssl.endpoint.identification.algorithm": "none",
            "enable.sasl.oauthbearer.unsecure.jwt": "true",
            "plugin.library.paths": "/tmp/monitoring-interceptor.so",
            "ssl.engine.location": "/tmp/engine.so",
            "sasl.kerberos.kinit.cmd": "kinit -k push-worker",
        ])
        #expect(configuration.allowedUnsafeKafkaSettings.count == 6)
        #expect(configuration.allowedUnsafeKafkaSettings.first
            == "PUSH_RDKAFKA_ENABLE_SSL_CERTIFICATE_VERIFICATION=false turns off verification of the brokers' TLS certificates")
    }

    @Test("PUSH_RDKAFKA_ALLOW_UNSAFE must be true or false; false refuses as if unset")
    func allowSwitchValues() {
        #expect(problems(minimal.merging(["PUSH_RDKAFKA_ALLOW_UNSAFE": "sure"]) { $1 })
            == ["PUSH_RDKAFKA_ALLOW_UNSAFE must be true or false, got \"sure\""])
        #expect(problems(minimal.merging(["PUSH_RDKAFKA_ALLOW_UNSAFE": "false", "PUSH_RDKAFKA_SSL_ENGINE_LOCATION": "/x.so"]) { $1 })
            == ["PUSH_RDKAFKA_SSL_ENGINE_LOCATION is set: it loads an OpenSSL engine library into the worker; refused unless PUSH_RDKAFKA_ALLOW_UNSAFE=true"])
    }
}
