import Foundation
import Logging
import PushCore
import PushPipeline
@testable import PushWorker
import Testing

@Suite("JSON log lines")
struct JSONLogHandlerTests {
    private func line(handlerMetadata: Logger.Metadata, event metadata: Logger.Metadata?) throws -> [String: String] {
        var handler = JSONLogHandler(label: "push-worker")
        handler.metadata = handlerMetadata
        let event = LogEvent(
            level: .info, message: "delivery finished", metadata: metadata, source: "PushPipeline",
            file: #fileID, function: #function, line: #line)
        let bytes = handler.line(for: event, at: 1_795_487_286_700)
        #expect(bytes.last == 0x0A)
        #expect(bytes.dropLast().contains(0x0A) == false)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: String])
        return object
    }

    @Test("a line is one JSON object: ts, level, label, msg, then every metadata value as text")
    func fields() throws {
        let object = try line(
            handlerMetadata: [:],
            event: [
                "jobId": "j-1", "attempts": .stringConvertible(3), "tags": ["a", "b"], "quote": "say \"hi\"\n",
            ])
        #expect(object["ts"] == "2026-11-24T02:28:06.700Z")
        #expect(object["level"] == "info")
        #expect(object["label"] == "push-worker")
        #expect(object["msg"] == "delivery finished")
        #expect(object["jobId"] == "j-1")
        #expect(object["attempts"] == "3")
        #expect(object["tags"] == Logger.MetadataValue.array(["a", "b"]).description)
        #expect(object["quote"] == "say \"hi\"\n")
    }

    @Test("a finished delivery's line, written without a metadata dictionary, is byte for byte the line its event gives")
    func finishedDeliveryLine() {
        let handler = JSONLogHandler(label: "push-worker")
        let outcomes = [
            Outcome(
                jobId: "j-1", userId: "u", bindingId: "b-1", provider: "apns", app: "com.example", status: .delivered, httpStatus: 200,
                providerMessageId: "m", attempts: 1, at: 5),
            Outcome(
                jobId: "j \"2\"\n", userId: "u", bindingId: "bé", provider: "webpush", app: nil, status: .rejected,
                reason: "gone \u{1}", action: .removeBinding, attempts: 12, at: 5),
        ]
        for outcome in outcomes {
            let event = LogEvent(
                level: .info, message: FinishedDeliveryLog.message, metadata: FinishedDeliveryLog.metadata(of: outcome), source: nil,
                file: #fileID, function: #function, line: #line)
            #expect(handler.finishedDeliveryLine(outcome, at: 1_795_487_286_700) == handler.line(for: event, at: 1_795_487_286_700))
        }
    }

    @Test("the event's metadata wins over the handler's for the same key; the handler's other keys stay")
    func merge() throws {
        let object = try line(handlerMetadata: ["replica": "w-1", "jobId": "from-handler"], event: ["jobId": "j-2"])
        #expect(object["replica"] == "w-1")
        #expect(object["jobId"] == "j-2")
        #expect(try self.line(handlerMetadata: ["replica": "w-1"], event: nil)["replica"] == "w-1")
    }
}

@Suite("Log lines leave in batches")
struct LogLineOutputTests {
    /// A pipe whose read end the test drains; the output writes to its write end.
    private final class Pipe: @unchecked Sendable {
        let read: Int32
        let write: Int32

        init() throws {
            var ends: [Int32] = [0, 0]
            try #require(pipe(&ends) == 0)
            read = ends[0]
            write = ends[1]
            _ = fcntl(read, F_SETFL, fcntl(read, F_GETFL) | O_NONBLOCK)
        }

        /// What has arrived so far, without waiting.
        func available() -> String {
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = Foundation.read(read, &buffer, buffer.count)
                if count <= 0 { break }
                bytes += buffer[0..<count]
            }
            return String(decoding: bytes, as: UTF8.self)
        }

        deinit {
            close(read)
            close(write)
        }
    }

    private func line(_ text: String) -> [UInt8] { Array("\(text)\n".utf8) }

    @Test("lines below notice wait for the batch delay and then leave together, in order, in fewer writes than lines")
    func batched() async throws {
        let pipe = try Pipe()
        let output = LogLineOutput(descriptor: pipe.write, batchDelay: .seconds(1))
        for index in 0..<100 { output.write(line("info \(index)"), urgent: false) }
        #expect(pipe.available() == "")
        try await Task.sleep(for: .seconds(3))
        #expect(pipe.available() == (0..<100).map { "info \($0)\n" }.joined())
        #expect(output.writeCount < 100)
    }

    @Test("a line at notice or above is written at once, after every line that waited")
    func urgentLinesGoAtOnceInOrder() throws {
        let pipe = try Pipe()
        let output = LogLineOutput(descriptor: pipe.write, batchDelay: .seconds(60))
        output.write(line("info 1"), urgent: false)
        output.write(line("info 2"), urgent: false)
        output.write(line("warning"), urgent: true)
        #expect(pipe.available() == "info 1\ninfo 2\nwarning\n")
        output.write(line("info 3"), urgent: false)
        output.flush()
        #expect(pipe.available() == "info 3\n")
    }

    @Test("more than the bound waiting is written by the caller at once, so a slow reader slows logging instead of growing memory")
    func boundedWaiting() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("log-\(UUID().uuidString)").path
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        try #require(descriptor >= 0)
        defer {
            close(descriptor)
            unlink(path)
        }
        let output = LogLineOutput(descriptor: descriptor, batchDelay: .seconds(60))
        let long = line(String(repeating: "x", count: 1023))
        let count = LogLineOutput.maximumWaitingBytes / long.count + 1
        for _ in 0..<count - 1 { output.write(long, urgent: false) }
        #expect(lseek(descriptor, 0, SEEK_END) == 0)
        output.write(long, urgent: false)
        #expect(lseek(descriptor, 0, SEEK_END) == count * long.count)
    }

    @Test("the JSON handler sends lines below notice to the batch and the others at once")
    func handlerLevels() throws {
        let pipe = try Pipe()
        let output = LogLineOutput(descriptor: pipe.write, batchDelay: .seconds(60))
        var logger = Logger(label: "push-worker") { JSONLogHandler(label: $0, output: output) }
        logger.logLevel = .debug
        logger.info("delivery finished")
        #expect(pipe.available() == "")
        logger.notice("shared store reachable again: resuming")
        let lines = pipe.available().split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines.first?.contains("\"msg\":\"delivery finished\"") == true)
        #expect(lines.last?.contains("\"level\":\"notice\"") == true)
    }
}
