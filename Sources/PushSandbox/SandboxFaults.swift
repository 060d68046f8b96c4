import Foundation
import PushCore
import Synchronization

/// Failure shares a sandbox injects into otherwise successful answers, for fault-injection
/// runs. Each share is the probability that one request gets that fault; a target (the
/// key the sandbox derives from a request, e.g. the push proxy's endpointId) is faulted
/// at most `maximumFaultsPerTarget` times, so a client with a larger attempt budget can
/// always deliver.
public struct SandboxFaults: Sendable, Equatable {
    /// Answer `failStatus` (with `Retry-After: retryAfterSeconds` when set) instead.
    public var failShare: Double = 0
    public var failStatus: Int = 503
    public var retryAfterSeconds: Int? = 1
    /// Close the whole TCP connection without answering (every stream on it fails).
    public var resetShare: Double = 0
    /// Every n-th answered request announces a graceful GOAWAY on its connection after the answer (0 = never).
    public var goAwayEvery: Int = 0
    /// Answer only after `stallMilliseconds`.
    public var stallShare: Double = 0
    public var stallMilliseconds: Int = 5000
    public var maximumFaultsPerTarget: Int = 2
    public var seed: UInt64 = 42
    /// Targets whose key starts with this are answered only after `slowMilliseconds`, every time (one slow user's
    /// push service); not counted as faults.
    public var slowTargetPrefix: String?
    public var slowMilliseconds: Int = 2000
    /// While a file exists at this path every request is answered `failStatus` (a provider outage an operator
    /// switches on and off); not counted as faults.
    public var outageFile: String?

    public init() {}

    public var isEmpty: Bool {
        failShare == 0 && resetShare == 0 && goAwayEvery == 0 && stallShare == 0 && slowTargetPrefix == nil && outageFile == nil
    }
}

/// Applies `SandboxFaults` around a responder and, optionally, records every answer as a
/// line `<ms since epoch> <key> <status|reset|stall:status|goaway:status> <connection> [<signer>]` in a
/// file (an independent record of what the provider saw, for ledger checks; the connection
/// number tells which answers a reset or GOAWAY may have kept from the client).
public final class FaultInjector: Sendable {
    private struct State {
        var random: UInt64
        var answered = 0
        var faultsPerTarget: [String: Int] = [:]
    }

    private let faults: SandboxFaults
    private let state: Mutex<State>
    private let record: AnswerRecord?

    public convenience init(_ faults: SandboxFaults, recordFile: String? = nil) throws {
        self.init(faults, record: try recordFile.map(AnswerRecord.init(path:)))
    }

    public init(_ faults: SandboxFaults, record: AnswerRecord?) {
        self.faults = faults
        state = Mutex(State(random: faults.seed | 1))
        self.record = record
    }

    private enum Fault { case fail, reset, stall }

    /// Wraps `responder`; `key` names the target a request is for (nil = never faulted, not recorded), `signer` the
    /// credential that signed it (recorded when not nil).
    public func wrap(
        _ responder: @escaping SandboxServer.Responder,
        key: @escaping @Sendable (SandboxRequest) -> String?,
        signer: @escaping @Sendable (SandboxRequest) -> String? = { _ in nil }
    ) -> SandboxServer.Responder {
        { [self] request in
            var response = responder(request)
            guard let target = key(request) else { return response }
            var label = String(response.status)
            if let outageFile = faults.outageFile, access(outageFile, F_OK) == 0 {
                response = SandboxResponse(
                    status: faults.failStatus,
                    headers: faults.retryAfterSeconds.map { [("retry-after", String($0))] } ?? [])
                label = "outage:\(faults.failStatus)"
            } else if let prefix = faults.slowTargetPrefix, target.hasPrefix(prefix) {
                response.delay = .milliseconds(faults.slowMilliseconds)
                label = "slow:" + label
            } else if (200..<300).contains(response.status) {
                let (fault, goAway) = decide(target)
                switch fault {
                case .fail?:
                    response = SandboxResponse(
                        status: faults.failStatus,
                        headers: faults.retryAfterSeconds.map { [("retry-after", String($0))] } ?? [])
                    label = String(faults.failStatus)
                case .reset?:
                    response.connectionAction = .reset
                    label = "reset"
                case .stall?:
                    response.delay = .milliseconds(faults.stallMilliseconds)
                    label = "stall:" + label
                case nil:
                    break
                }
                if goAway, case nil = response.connectionAction {
                    response.connectionAction = .gracefulGoAway
                    label = "goaway:" + label
                }
            }
            record?.write(key: target, label: label, connection: request.connection, signer: signer(request))
            return response
        }
    }

    private func decide(_ target: String) -> (Fault?, goAway: Bool) {
        state.withLock { state in
            state.answered += 1
            let goAway = faults.goAwayEvery > 0 && state.answered % faults.goAwayEvery == 0
            // xorshift64*: reproducible for a seed, good enough to pick shares.
            state.random ^= state.random >> 12
            state.random ^= state.random << 25
            state.random ^= state.random >> 27
            let draw = Double((state.random &* 2_685_821_657_736_338_717) >> 11) / Double(1 << 53)
            let fault: Fault?
            if draw < faults.failShare {
                fault = .fail
            } else if draw < faults.failShare + faults.resetShare {
                fault = .reset
            } else if draw < faults.failShare + faults.resetShare + faults.stallShare {
                fault = .stall
            } else {
                fault = nil
            }
            guard let fault, state.faultsPerTarget[target, default: 0] < faults.maximumFaultsPerTarget else { return (nil, goAway) }
            state.faultsPerTarget[target, default: 0] += 1
            return (fault, goAway)
        }
    }

}

/// The record of a sandbox's answers, one line each:
/// `<ms since epoch> <key> <label> <connection> [<signer>]` (an independent account of what the provider
/// saw, for ledger checks; the connection number tells which answers a reset or GOAWAY may
/// have kept from the client; the signer, where the sandbox knows one, which credential signed the
/// request, e.g. an APNs provider token's key id). Lines are single `write`s to an `O_APPEND` file, so several
/// sandboxes may share one record.
public final class AnswerRecord: Sendable {
    private let descriptor: Int32

    public init(path: String) throws {
        descriptor = open(path, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC, 0o644)
        guard descriptor >= 0 else { throw CocoaError(.fileWriteNoPermission) }
    }

    deinit { close(descriptor) }

    /// For `SandboxServer.start(connectionClosed:)`: records `<ms> - closed <connection>`, since a connection
    /// either side closes may have swallowed answers already given on it (a killed worker never read them).
    public var connectionClosed: @Sendable (ObjectIdentifier) -> Void {
        { [self] in write(key: "-", label: "closed", connection: $0) }
    }

    /// - Parameter label: the status, or what happened instead (`reset`, `stall`, `stall:<status>`, `goaway:<status>`).
    public func write(key: String, label: String, connection: ObjectIdentifier?, signer: String? = nil) {
        let number = connection.map { UInt(bitPattern: $0.hashValue) } ?? 0
        let signed = signer.map { " " + $0 } ?? ""
        var bytes = Array("\(Int64(Date().timeIntervalSince1970 * 1000)) \(key) \(label) \(number)\(signed)\n".utf8)
        _ = bytes.withUnsafeMutableBytes { Foundation.write(descriptor, $0.baseAddress, $0.count) }
    }
}
