/// A strict reader of the Prometheus text exposition format 0.0.4, for tests that check what
/// `/metrics` shows: every line is a `# HELP`/`# TYPE` line, another comment, blank, or one sample
/// `name{label="value",…} value [timestamp]`; anything else — a raw line break in a label value, an
/// unknown escape, a bad name or number — is an error naming the line.
/// (https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format)
public enum PrometheusText {
    public struct Sample: Equatable, Sendable {
        public let name: String
        public let labels: [String: String]
        public let value: Double
    }

    public struct Malformed: Error, CustomStringConvertible {
        public let line: Int
        public let reason: String
        public var description: String { "line \(line): \(reason)" }
    }

    public static func parse(_ text: String) throws(Malformed) -> [Sample] {
        var samples: [Sample] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let bytes = Array(line.utf8)
            if bytes.isEmpty { continue }
            if bytes[0] == UInt8(ascii: "#") {
                try comment(bytes, line: index + 1)
                continue
            }
            var reader = Reader(bytes: bytes, line: index + 1)
            samples.append(try reader.sample())
        }
        return samples
    }

    private static func comment(_ bytes: [UInt8], line: Int) throws(Malformed) {
        let text = String(decoding: bytes, as: UTF8.self)
        let words = text.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: true)
        guard words.count >= 3, words[0] == "#", words[1] == "TYPE" || words[1] == "HELP" else { return }
        guard isMetricName(Array(words[2].utf8)) else { throw Malformed(line: line, reason: "bad metric name in \(words[1])") }
        if words[1] == "TYPE" {
            guard words.count == 4, ["counter", "gauge", "histogram", "summary", "untyped"].contains(words[3]) else {
                throw Malformed(line: line, reason: "bad TYPE")
            }
        }
    }

    static func isMetricName(_ name: [UInt8]) -> Bool {
        guard let first = name.first, isLetter(first) || first == UInt8(ascii: "_") || first == UInt8(ascii: ":") else { return false }
        return name.allSatisfy { isLetter($0) || isDigit($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ":") }
    }

    static func isLabelName(_ name: [UInt8]) -> Bool {
        guard let first = name.first, isLetter(first) || first == UInt8(ascii: "_") else { return false }
        return name.allSatisfy { isLetter($0) || isDigit($0) || $0 == UInt8(ascii: "_") }
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
    }

    private static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

    private struct Reader {
        let bytes: [UInt8]
        let line: Int
        var position = 0

        func failure(_ reason: String) -> Malformed { Malformed(line: line, reason: reason) }

        mutating func sample() throws(Malformed) -> Sample {
            let name = take {
                PrometheusText.isLetter($0) || PrometheusText.isDigit($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ":")
            }
            guard PrometheusText.isMetricName(name) else { throw failure("bad metric name") }
            var labels: [String: String] = [:]
            if peek == UInt8(ascii: "{") {
                position += 1
                while peek != UInt8(ascii: "}") {
                    let label = take { PrometheusText.isLetter($0) || PrometheusText.isDigit($0) || $0 == UInt8(ascii: "_") }
                    guard PrometheusText.isLabelName(label) else { throw failure("bad label name") }
                    guard next() == UInt8(ascii: "="), next() == UInt8(ascii: "\"") else {
                        throw failure("expected =\" after a label name")
                    }
                    let key = String(decoding: label, as: UTF8.self)
                    guard labels.updateValue(try quoted(), forKey: key) == nil else { throw failure("label \(key) twice") }
                    if peek == UInt8(ascii: ",") { position += 1 } else if peek != UInt8(ascii: "}") { throw failure("expected , or }") }
                }
                position += 1
            }
            guard next() == UInt8(ascii: " ") else { throw failure("expected a space before the value") }
            let fields = bytes[position...].split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
            guard (1...2).contains(fields.count), let value = Self.number(String(decoding: fields[fields.startIndex], as: UTF8.self)) else {
                throw failure("bad value")
            }
            if fields.count == 2, Int64(String(decoding: fields[fields.startIndex + 1], as: UTF8.self)) == nil {
                throw failure("bad timestamp")
            }
            return Sample(name: String(decoding: name, as: UTF8.self), labels: labels, value: value)
        }

        /// A label value after its opening quote: `\\`, `\"` and `\n` are the only escapes; the closing quote ends it.
        mutating func quoted() throws(Malformed) -> String {
            var value: [UInt8] = []
            while true {
                guard let byte = next() else { throw failure("unterminated label value") }
                switch byte {
                case UInt8(ascii: "\""): return String(decoding: value, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    switch next() {
                    case UInt8(ascii: "\\"): value.append(UInt8(ascii: "\\"))
                    case UInt8(ascii: "\""): value.append(UInt8(ascii: "\""))
                    case UInt8(ascii: "n"): value.append(UInt8(ascii: "\n"))
                    default: throw failure("unknown escape in a label value")
                    }
                default: value.append(byte)
                }
            }
        }

        static func number(_ text: String) -> Double? {
            switch text {
            case "NaN": .nan
            case "+Inf": .infinity
            case "-Inf": -.infinity
            default: text.isEmpty || text.contains(where: { $0.isLetter && $0 != "e" && $0 != "E" }) ? nil : Double(text)
            }
        }

        var peek: UInt8? { position < bytes.count ? bytes[position] : nil }

        mutating func next() -> UInt8? {
            defer { position += 1 }
            return peek
        }

        mutating func take(while matches: (UInt8) -> Bool) -> [UInt8] {
            let start = position
            while let byte = peek, matches(byte) { position += 1 }
            return Array(bytes[start..<position])
        }
    }
}
