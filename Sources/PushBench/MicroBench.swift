import APNsPlugin
import Foundation
import PushCore
import PushCrypto

/// The hot pieces, each timed alone on one core beside the limit it is judged against.
public enum MicroBench {
    public struct Result: Sendable, Codable {
        public let name: String
        public let operationsPerSecond: Double
        public let microsecondsPerOperation: Double
        /// What this number is judged against, and that reference's rate when measured here.
        public let reference: String?
        public let referencePerSecond: Double?
        public var ratio: Double? { referencePerSecond.map { operationsPerSecond / $0 } }
    }

    /// Runs `body` repeatedly for about `duration`, returning operations per second.
    static func rate(for duration: Duration = .seconds(1), _ body: () throws -> Void) rethrows -> Double {
        let clock = ContinuousClock()
        for _ in 0..<100 { try body() }
        var operations = 0
        let started = clock.now
        var elapsed = Duration.zero
        while elapsed < duration {
            for _ in 0..<100 { try body() }
            operations += 100
            elapsed = clock.now - started
        }
        return Double(operations) / elapsed.seconds
    }

    public static func run() throws -> [Result] {
        var results: [Result] = []
        func add(_ name: String, _ perSecond: Double, reference: String? = nil, referencePerSecond: Double? = nil) {
            results.append(
                Result(
                    name: name, operationsPerSecond: perSecond, microsecondsPerOperation: 1e6 / perSecond,
                    reference: reference, referencePerSecond: referencePerSecond))
        }

        let jobs = BenchJobs(
            runId: "micro", mix: try JobMix(parsing: "apns-alert=1"), apnsApps: ["com.example.chat"],
            fcmProject: "bench-project", webPush: nil, users: 1000)
        let job = jobs.value(42, createdAt: currentTimeMilliseconds())
        let decoder = JobDecoder(formats: TargetFormats([APNsTargetFormat()]))
        let decode = try rate { _ = try decoder.decode(job, fallbackCreatedAt: 0) }
        let foundationParse = try rate { _ = try JSONSerialization.jsonObject(with: Data(job)) }
        add(
            "job decode + validate (\(job.count) B apns-alert job)", decode,
            reference: "Foundation JSONSerialization parse only, same bytes", referencePerSecond: foundationParse)

        let outcome = Outcome(
            jobId: "r1-123456", userId: "r1-u123", bindingId: "r1-b123456", provider: .apns, app: "com.example.chat",
            status: .delivered, httpStatus: 200, providerMessageId: "8E7F3A2B-1C4D-4E5F-9A8B-7C6D5E4F3A2B",
            attempts: 1, at: currentTimeMilliseconds())
        add("outcome encode", rate { _ = outcome.encoded() })

        let tokens = APNsTokenCache(key: try PrivateKey.generateP256(), keyId: "BENCH00001", teamId: "BENCHTEAM1")
        _ = try tokens.token()
        let reuse = try rate { _ = try tokens.token() }
        let signingKey = try PrivateKey.generateP256()
        let signing = try rate(for: .milliseconds(500)) {
            _ = try JSONWebToken.sign(
                algorithm: .es256, headerFields: [("kid", "BENCH00001")],
                claims: { claims in
                    claims.member("iss", "BENCHTEAM1")
                    claims.member("iat", Int64(1_795_310_000))
                }, key: signingKey)
        }
        add(
            "APNs provider token, cached (\(tokens.generatedCount) signed)", reuse,
            reference: "signing a fresh ES256 token", referencePerSecond: signing)

        let browser = try PrivateKey.generateP256()
        let uaPublic = try browser.rawPublicKey()
        let auth = try RandomBytes.generate(16)
        let plaintext = Array(String(repeating: "x", count: 300).utf8)
        let encrypt = try rate { _ = try WebPushEncryption.encrypt(plaintext, uaPublic: uaPublic, authSecret: auth) }
        let peer = try PrivateKey.generateP256()
        let ecdh = try rate { _ = try peer.sharedSecret(withPeer: uaPublic) }
        add(
            "Web Push aes128gcm encrypt (300 B, fresh sender key)", encrypt,
            reference: "P-256 ECDH derive alone (OpenSSL EVP)", referencePerSecond: ecdh)
        return results
    }

    /// `run()` and the pieces that take the whole process (`HandOffBench`).
    public static func runAll() async throws -> [Result] {
        try run() + (await HandOffBench.run())
    }

    public static func table(_ results: [Result]) -> String {
        let width = results.map(\.name.count).max() ?? 0
        return results.map { result in
            var line =
                result.name.padding(toLength: width, withPad: " ", startingAt: 0)
                + String(format: "  %10.0f/s  %8.2f µs", result.operationsPerSecond, result.microsecondsPerOperation)
            if let reference = result.reference, let perSecond = result.referencePerSecond, let ratio = result.ratio {
                line += String(format: "   vs %@: %.0f/s (ratio %.2f)", reference, perSecond, ratio)
            }
            return line
        }.joined(separator: "\n")
    }
}
