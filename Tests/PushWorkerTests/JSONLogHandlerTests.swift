import Foundation
import Logging
@testable import PushWorker
import Testing

@Suite("JSON log lines")
struct JSONLogHandlerTests {
    private func line(handlerMetadata: Logger.Metadata, event metadata: Logger.Metadata?) throws -> [String: String] {
        var handler = JSONLogHandler(label: "push-worker")
        handler.metadata = handlerMetadata
        let event = LogEvent(level: .info, message: "delivery finished", metadata: metadata, source: "PushPipeline",
                             file: #fileID, function: #function, line: #line)
        let bytes = handler.line(for: event, at: 1_795_487_286_700)
        #expect(bytes.last == 0x0A)
        #expect(bytes.dropLast().contains(0x0A) == false)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: String])
        return object
    }

    @Test("a line is one JSON object: ts, level, label, msg, then every metadata value as text")
    func fields() throws {
        let object = try line(handlerMetadata: [:], event: [
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

    @Test("the event's metadata wins over the handler's for the same key; the handler's other keys stay")
    func merge() throws {
        let object = try line(handlerMetadata: ["replica": "w-1", "jobId": "from-handler"], event: ["jobId": "j-2"])
        #expect(object["replica"] == "w-1")
        #expect(object["jobId"] == "j-2")
        #expect(try self.line(handlerMetadata: ["replica": "w-1"], event: nil)["replica"] == "w-1")
    }
}
