import Foundation
import PushCore
import Synchronization
import Testing

@Suite("Named threads")
struct NamedThreadTests {
    private static func kernelName(ofThreadNamed name: String) -> String {
        let seen = Mutex<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        NamedThread.start(name) {
            seen.withLock { $0 = try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8) }
            done.signal()
        }
        done.wait()
        return seen.withLock { $0 ?? "" }.trimmingCharacters(in: .newlines)
    }

    @Test("a thread started by NamedThread carries its name in the kernel, where top -H and perf read it")
    func nameReachesTheKernel() {
        #expect(Self.kernelName(ofThreadNamed: "kafka-normal") == "kafka-normal")
    }

    @Test("a name longer than the kernel's 15 bytes is cut at a character boundary")
    func longNamesAreCut() {
        #expect(Self.kernelName(ofThreadNamed: "kafka-producer-poll") == "kafka-producer-")
        #expect(Self.kernelName(ofThreadNamed: "curl-ééééééééé") == "curl-ééééé")
    }
}
