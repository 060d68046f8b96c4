/// The Redis serialization protocol (RESP2) for requests: each command is an array of bulk strings.
enum RedisProtocol {
    /// The commands as one buffer, ready to be written in one piece.
    static func request(_ commands: [RedisCommand]) -> [UInt8] {
        var size = 0
        for command in commands {
            size += 16
            for argument in command.arguments { size += argument.count + 24 }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(size)
        for command in commands {
            bytes.append(UInt8(ascii: "*"))
            appendDecimal(command.arguments.count, to: &bytes)
            bytes.append(contentsOf: [13, 10])
            for argument in command.arguments {
                bytes.append(UInt8(ascii: "$"))
                appendDecimal(argument.count, to: &bytes)
                bytes.append(contentsOf: [13, 10])
                bytes.append(contentsOf: argument)
                bytes.append(contentsOf: [13, 10])
            }
        }
        return bytes
    }

    /// Appends a count's decimal digits (a small string: no allocation).
    private static func appendDecimal(_ value: Int, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: String(value).utf8)
    }
}
