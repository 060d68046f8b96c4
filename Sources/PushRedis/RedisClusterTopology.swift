/// How Redis Cluster spreads keys (the cluster specification, "Key distribution model" and
/// "Hash tags"): 16 384 slots, a key's slot is CRC16 (XMODEM) of the key — or of its hash tag,
/// the part between the first `{` and the next `}` when that part is not empty — modulo 16 384.
public enum RedisKeySlot {
    public static let count = 16_384

    public static func of(_ key: some Collection<UInt8>) -> Int {
        let bytes = Array(key)
        var hashed = bytes[...]
        if let open = bytes.firstIndex(of: UInt8(ascii: "{")),
            let close = bytes[(open + 1)...].firstIndex(of: UInt8(ascii: "}")), close > open + 1
        {
            hashed = bytes[(open + 1)..<close]
        }
        return Int(crc16(hashed)) % count
    }

    public static func of(_ key: String) -> Int { of(Array(key.utf8)) }

    /// CRC-16/XMODEM: polynomial 0x1021, initial value 0, no reflection.
    static func crc16(_ bytes: ArraySlice<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc = (crc << 8) ^ table[Int((crc >> 8) ^ UInt16(byte))]
        }
        return crc
    }

    private static let table: [UInt16] = (0..<256).map { index in
        var crc = UInt16(index) << 8
        for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        return crc
    }
}

/// A node of the cluster as clients reach it.
public struct RedisNodeAddress: Hashable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// `host:port` as a redirection names it (`MOVED 3999 127.0.0.1:6381`), IPv6 hosts included.
    init?(redirectTarget text: Substring) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (1...65_535).contains(port) else {
            return nil
        }
        let host = text[..<colon].trimmingCharacters(in: ["[", "]"])
        guard !host.isEmpty else { return nil }
        self.init(host: host, port: port)
    }
}

/// Which master serves each slot, from `CLUSTER SLOTS`.
public struct RedisSlotMap: Sendable, Equatable {
    private var owners: [RedisNodeAddress?]
    /// Every master that owns at least one slot, kept with the owners (a pipeline asks for it).
    public private(set) var masters: Set<RedisNodeAddress> = []

    public init() { owners = Array(repeating: nil, count: RedisKeySlot.count) }

    /// From the reply of `CLUSTER SLOTS`: `[[start, end, [host, port, id, …], replicas…], …]`. A node
    /// announced with an empty host (`""`, the node did not learn its own address) is reached at
    /// `announcedBy`'s host, as the specification asks. Nil when the reply has no usable range.
    public init?(clusterSlots reply: RedisValue, announcedBy: RedisNodeAddress) {
        guard case .array(let ranges) = reply else { return nil }
        self.init()
        var covered = 0
        for range in ranges {
            guard case .array(let fields) = range, fields.count >= 3,
                let start = fields[0].integer, let end = fields[1].integer,
                start >= 0, end < Int64(RedisKeySlot.count), start <= end,
                case .array(let master) = fields[2], master.count >= 2,
                let host = master[0].string, let port = master[1].integer, (1...65_535).contains(port)
            else { continue }
            let address = RedisNodeAddress(host: host.isEmpty || host == "?" ? announcedBy.host : host, port: Int(port))
            for slot in Int(start)...Int(end) { owners[slot] = address }
            covered += Int(end - start + 1)
        }
        guard covered > 0 else { return nil }
        masters = Set(owners.compactMap { $0 })
    }

    public func owner(of slot: Int) -> RedisNodeAddress? { owners[slot] }

    public mutating func assign(_ slot: Int, to address: RedisNodeAddress) {
        let previous = owners[slot]
        owners[slot] = address
        masters.insert(address)
        if let previous, previous != address, !owners.contains(previous) { masters.remove(previous) }
    }
}

/// What a cluster node's error reply asks of the client (the specification's redirections).
enum RedisRedirection: Equatable {
    /// The slot lives elsewhere for good: refresh the map, send it there.
    case moved(slot: Int, to: RedisNodeAddress)
    /// The slot is migrating: send this one command there, after `ASKING`.
    case ask(slot: Int, to: RedisNodeAddress)
    /// A multi-key command during a migration, or a failover in progress: try again shortly.
    case tryAgain
    /// The cluster is down (slots uncovered) or a master is being replaced.
    case clusterDown

    init?(_ reply: RedisValue) {
        guard case .error(let message) = reply else { return nil }
        let parts = message.split(separator: " ")
        switch parts.first {
        case "MOVED", "ASK":
            guard parts.count == 3, let slot = Int(parts[1]), (0..<RedisKeySlot.count).contains(slot),
                let address = RedisNodeAddress(redirectTarget: parts[2])
            else { return nil }
            self = parts[0] == "MOVED" ? .moved(slot: slot, to: address) : .ask(slot: slot, to: address)
        case "TRYAGAIN":
            self = .tryAgain
        case "CLUSTERDOWN":
            self = .clusterDown
        default:
            return nil
        }
    }
}

extension RedisCommand {
    /// The first key the command names, where the commands this worker sends keep it: after the
    /// command name, or for `EVAL`/`EVALSHA` after the script and the key count. Nil: no key
    /// (`PING`, `MULTI`, `EXEC`, `SCRIPT LOAD`, …), which any node may answer.
    var firstKey: [UInt8]? {
        let ranges = argumentRanges(limit: 4)
        guard let name = ranges.first.map({ String(decoding: encoded[$0], as: UTF8.self).uppercased() }) else { return nil }
        switch name {
        case "PING", "MULTI", "EXEC", "DISCARD", "SCRIPT", "CLUSTER", "ASKING", "AUTH", "SELECT", "INFO", "READONLY", "WAIT", "ROLE":
            return nil
        case "EVAL", "EVALSHA":
            guard ranges.count > 3, let count = Int(String(decoding: encoded[ranges[2]], as: UTF8.self)), count > 0 else { return nil }
            return Array(encoded[ranges[3]])
        default:
            return ranges.count > 1 ? Array(encoded[ranges[1]]) : nil
        }
    }
}
