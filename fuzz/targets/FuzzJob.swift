import PushCore

extension FuzzInput {
    /// A delivery of a job the worker would accept: fields from the input are written as a v1
    /// job document and read back through `JobDecoder` with a fuzzed Kafka timestamp, so only
    /// values the decoder lets through (control characters included) reach the code under
    /// test. nil when the decoder refuses the document.
    mutating func delivery() -> Delivery? {
        var writer = JSONWriter(capacity: 512)
        let flags = byte()
        writer.beginObject()
        writer.member("v", Int64(1))
        writer.member("id", string())
        writer.member("kind", JobKind.allCases[Int(byte()) % JobKind.allCases.count].rawValue)
        if flags & 1 != 0 { writer.member("createdAt", int64()) }
        if flags & 2 != 0 { writer.member("ttl", int64()) }
        if flags & 4 != 0 { writer.member("priority", bool() ? "high" : "normal") }
        writer.member("userId", string())
        if flags & 8 != 0 { writer.member("collapseKey", string()) }
        if flags & 16 != 0 {
            writer.key("notification")
            writer.beginObject()
            writer.member("title", optionalString())
            writer.member("body", optionalString())
            writer.member("sound", optionalString())
            if bool() { writer.member("badge", int64()) }
            writer.endObject()
        }
        if flags & 32 != 0 {
            writer.key("data")
            writer.beginObject()
            for _ in 0..<(byte() % 8) { writer.member(string(), string()) }
            writer.endObject()
        }
        if flags & 64 != 0 { writer.member("body", string()) }
        writer.key("targets")
        writer.beginArray()
        writer.beginObject()
        writer.member("bindingId", string())
        if flags & 128 != 0 {
            writer.member(bool() ? "rfc8599" : "xmpush", string())
        } else {
            writer.member("provider", fuzzProviders[Int(byte()) % fuzzProviders.count])
            let fields = byte()
            for (bit, name) in ["app", "token", "environment", "pushType", "endpoint", "tokenType", "platform"].enumerated()
            where fields & (1 << bit) != 0 {
                writer.member(name, string())
            }
            if fields & 128 != 0 {
                writer.key("keys")
                writer.beginObject()
                writer.member("p256dh", string())
                writer.member("auth", string())
                writer.endObject()
            }
        }
        writer.endObject()
        writer.endArray()
        writer.endObject()
        let kafkaTimestamp = int64()
        guard let job = try? JobDecoder().decode(writer.bytes, fallbackCreatedAt: kafkaTimestamp) else { return nil }
        return Delivery(job: job, target: job.targets[0], attempt: Int(byte()) + 1, now: int64())
    }
}
