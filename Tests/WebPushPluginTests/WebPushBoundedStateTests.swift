import Foundation
import PushCore
import Testing
import TestSupport
@testable import WebPushPlugin

@Suite("Web Push state keyed by push-service hosts stays bounded")
struct WebPushBoundedStateTests {
    /// Resident memory of this process (VmRSS), in MiB; other suites run beside this one, so it is reported, not asserted.
    static func residentMiB() -> Double {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kilobytes = Double(line.split(separator: " ").dropFirst().first ?? "")
        else { return 0 }
        return kilobytes / 1024
    }

    /// One of three hostile endpoints, each on a host no other uses: a name that resolves to a private address
    /// (refused after the lookup), a literal private address (refused without one), and a public host whose push
    /// service answers 410 (looked up, signed for and sent).
    static func endpoint(_ index: Int) -> String {
        switch index % 3 {
        case 0: "https://private\(index).example/s"
        case 1: "https://10.\(index >> 16 & 255).\(index >> 8 & 255).\(index & 255)/s"
        default: "https://gone\(index).example/s"
        }
    }

    @Test("100 000 distinct refused or gone push-service origins leave the DNS cache and VAPID tokens within their bounds")
    func distinctOriginsStayBounded() async throws {
        _ = TestMetrics.registry
        let names = ScriptedNameServer(countsEachHost: false)
        let resolver = names.resolver()
        let provider = try WebPushDeliveries.provider(resolver, transport: AnsweringTransport(status: 410))
        let before = Self.residentMiB()
        let origins = 100_000
        let outcomes = await withTaskGroup(of: (refused: Int, rejected: Int).self) { group in
            let lanes = 32
            for lane in 0..<lanes {
                group.addTask {
                    var counts = (refused: 0, rejected: 0)
                    for index in stride(from: lane, to: origins, by: lanes) {
                        switch await provider.deliver(WebPushDeliveries.delivery(Self.endpoint(index), id: "j\(index)")) {
                        case .failed(let reason, _, _, _) where reason.contains("endpoint refused"): counts.refused += 1
                        case .rejected(_, 410?, _, _): counts.rejected += 1
                        case let other: Issue.record("\(Self.endpoint(index)): \(other)")
                        }
                    }
                    return counts
                }
            }
            return await group.reduce(into: (refused: 0, rejected: 0)) {
                $0.refused += $1.refused
                $0.rejected += $1.rejected
            }
        }
        let after = Self.residentMiB()
        let entries = provider.boundedEntries
        print(
            "100 000 distinct Web Push origins: RSS \(Int(before)) → \(Int(after)) MiB; DNS cache \(entries.dnsCache) hosts, "
                + "VAPID tokens \(entries.vapidTokens), name-server lookups \(names.total)")
        #expect(outcomes.refused == 66_667)
        #expect(outcomes.rejected == 33_333)
        #expect(names.total == 66_667, "each looked-up host asked once")
        #expect(entries.dnsCache <= HostResolver.Limits().cachedHosts)
        #expect(entries.vapidTokens <= VAPIDTokenCache.defaultCapacity)
        #expect(entries.vapidTokens == VAPIDTokenCache.defaultCapacity, "the cache fills to its bound, no further")
        #expect(resolver.hostsInFlight == 0)
        let gauge = try #require(TestMetrics.value(of: #"push_bounded_entries{map="vapid_tokens"}"#))
        #expect(gauge <= Double(VAPIDTokenCache.defaultCapacity))
    }
}
