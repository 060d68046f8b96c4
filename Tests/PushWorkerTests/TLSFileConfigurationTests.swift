import Foundation
import PushCore
import PushCrypto
import PushHTTP
import PushPluginAPI
import PushSandbox
import Testing
import TestSupport
@testable import PushWorker

/// TLS files as configuration reads them: once per version, checked before the version is used, never a FIFO or a file
/// over 1 MiB, and a client certificate's identity the digest of the bytes its connections use.
@Suite("TLS files in the configuration: read once per version, checked, the last good version kept")
struct TLSFileConfigurationTests {
    static let chat = "com.example.chat"

    /// A harness with one token-auth app; its `PUSH_APNS_CA_FILE` is the sandbox's CA file.
    static func harness() async throws -> LiveConfigurationHarness {
        let key = try LiveConfigurationHarness.key("KEYAAAAAAA")
        return try await LiveConfigurationHarness.sharingOneKey(key, apps: [chat], bundleIds: [chat])
    }

    @Test(
        "a half-written CA file in a new version is refused by live configuration; new connections keep the bytes the last good version read"
    )
    func halfWrittenCAKeepsTheLastGoodVersion() async throws {
        let harness = try await Self.harness()
        let running = harness.live.loadedVersion
        let pem = try String(contentsOfFile: harness.tls.caFile, encoding: .utf8)
        try String(pem.prefix(pem.count / 2)).write(toFile: harness.tls.caFile, atomically: true, encoding: .utf8)

        guard case .refused(let problems) = harness.live.check() else {
            Issue.record("a CA file that does not parse must not be taken")
            return
        }
        #expect(problems.count == 1)
        #expect(problems.first?.hasPrefix("PUSH_APNS_CA_FILE: \(harness.tls.caFile) cannot make a TLS client context") == true)
        #expect(harness.live.loadedVersion == running)
        // The first connection opens only now, after the file broke: it trusts the CA the running version read.
        #expect(try await harness.send(to: Self.chat).status == .delivered)
        await harness.stop()
    }

    @Test("a FIFO put where a CA file was is refused by live configuration, without blocking the check")
    func fifoIsRefusedOnReload() async throws {
        let harness = try await Self.harness()
        try FileManager.default.removeItem(atPath: harness.tls.caFile)
        try makeFIFO(at: harness.tls.caFile)

        let reload = await withFIFOWatchdog(unblocking: harness.tls.caFile) { harness.live.check() }
        #expect(reload == .refused(["PUSH_APNS_CA_FILE: \(harness.tls.caFile) is a FIFO, not a regular file: refused"]))
        #expect(try await harness.send(to: Self.chat).status == .delivered)
        await harness.stop()
    }

    /// One token-auth APNs app, with `PUSH_APNS_CA_FILE` set to `caFile`.
    static func apnsEnvironment(caFile: String, in scratch: ScratchDirectory) throws -> [String: String] {
        let keyFile = scratch.url.appendingPathComponent("AuthKey.p8").path
        try PrivateKey.generateP256().pem().write(toFile: keyFile, atomically: true, encoding: .utf8)
        return [
            "PUSH_KAFKA_BROKERS": "k:9092", "PUSH_APNS_KEY_FILE": keyFile, "PUSH_APNS_KEY_ID": "KEYID4APNS",
            "PUSH_APNS_TEAM_ID": "TEAM123456", "PUSH_APNS_BUNDLE_ID": chat, "PUSH_APNS_CA_FILE": caFile,
        ]
    }

    @Test("start-up refuses a FIFO named as a CA file with one clear line, without blocking")
    func fifoIsRefusedAtStartUp() async throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let fifo = scratch.url.appendingPathComponent("ca.pem").path
        try makeFIFO(at: fifo)
        let environment = try Self.apnsEnvironment(caFile: fifo, in: scratch)

        let refused = await withFIFOWatchdog(unblocking: fifo) { problems(environment) }
        #expect(refused == ["PUSH_APNS_CA_FILE: \(fifo) is a FIFO, not a regular file: refused"])
    }

    @Test("start-up refuses a CA file over 1 MiB with one clear line")
    func oversizedFileIsRefusedAtStartUp() throws {
        let scratch = try ScratchDirectory()
        defer { scratch.remove() }
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let large = scratch.url.appendingPathComponent("ca.pem").path
        // A valid bundle, padded past the limit with comment lines.
        let padding = String(repeating: String(repeating: "#", count: 1023) + "\n", count: 1025)
        try (padding + tls.caCertificatePEM).write(toFile: large, atomically: true, encoding: .utf8)

        #expect(
            problems(try Self.apnsEnvironment(caFile: large, in: scratch)) == [
                "PUSH_APNS_CA_FILE: \(large) is larger than 1024 KiB: refused"
            ])
    }

    @Test("a client certificate's connection identity is the SHA-256 of the certificate and key bytes read, whatever the files hold later")
    func identityIsTheDigestOfTheBytesRead() throws {
        let tls = try SandboxTLS.make()
        defer { tls.remove() }
        let other = try SandboxTLS.make()
        defer { other.remove() }
        let certificate = try Array(Data(contentsOf: URL(fileURLWithPath: tls.clientCertificateFile)))
        let key = try Array(Data(contentsOf: URL(fileURLWithPath: tls.clientKeyFile)))
        let expected = ConnectionIdentity(
            "certificate sha256:" + Digest.hex(Digest.sha256(Digest.sha256(certificate) + Digest.sha256(key))))

        let options = TLSOptions(clientCertificateFile: tls.clientCertificateFile, clientKeyFile: tls.clientKeyFile)
        #expect(options.clientCertificateIdentity == expected)
        #expect(try options.clientCertificateFile?.bytes() == certificate)
        // Another certificate rotated in at the same paths: the options, their identity and their bytes stay.
        try FileManager.default.removeItem(atPath: tls.clientCertificateFile)
        try FileManager.default.copyItem(atPath: other.clientCertificateFile, toPath: tls.clientCertificateFile)
        try FileManager.default.removeItem(atPath: tls.clientKeyFile)
        try FileManager.default.copyItem(atPath: other.clientKeyFile, toPath: tls.clientKeyFile)
        #expect(options.clientCertificateIdentity == expected)
        #expect(try options.clientCertificateFile?.bytes() == certificate)
        let rotated = TLSOptions(clientCertificateFile: tls.clientCertificateFile, clientKeyFile: tls.clientKeyFile)
        #expect(rotated.clientCertificateIdentity != expected, "read again, the rotated certificate is another identity")
    }
}
