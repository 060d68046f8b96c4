/// The Redis serialization protocol (RESP2) for requests: each command is an array of bulk strings.
enum RedisProtocol {
    /// The commands as one buffer, ready to be written in one piece.
    static func request(_ commands: [RedisCommand]) -> [UInt8] {
        assert(commands.allSatisfy(\.isComplete), "a command with fewer arguments than it declared")
        if commands.count == 1 { return commands[0].encoded }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(commands.reduce(0) { $0 + $1.encoded.count })
        for command in commands { bytes.append(contentsOf: command.encoded) }
        return bytes
    }
}
