extension JSONValue {
    /// `patch` merged into this document as RFC 7396 (JSON Merge Patch) defines it: an object's members
    /// merge member by member, recursively; `null` removes a member; any other value replaces. Used to
    /// apply a job's per-provider `overrides` last onto what a plugin built. Members keep their order:
    /// existing ones stay in place, new ones are appended in the patch's order. Linear in the sizes of
    /// both documents (each object's members are looked up through `IndexedMembers`), since an override
    /// is outside input and may have thousands of members.
    public func merging(_ patch: JSONValue) -> JSONValue {
        guard case .object(let patchMembers) = patch else { return patch }
        var members: IndexedMembers
        if case .object(let existing) = self { members = IndexedMembers(existing) } else { members = IndexedMembers([]) }
        for (key, value) in patchMembers {
            if case .null = value {
                members.remove(key)
            } else if !members.merge(value, into: key) {
                members.append(key, JSONValue.null.merging(value))
            }
        }
        return .object(members.ordered)
    }
}

/// An object's members in document order with a dictionary from name to position, so that finding,
/// replacing and removing a member costs O(1) instead of a scan. A removed member leaves an empty slot
/// until `ordered`. With duplicate names (which `JSONParser` refuses, but a value built in code may
/// hold) the first one is the member, as a scan from the start would find it.
struct IndexedMembers {
    private var slots: [(key: String, value: JSONValue)?]
    private var positions: [String: Int]
    private let hasDuplicateNames: Bool

    init(_ members: [(key: String, value: JSONValue)]) {
        slots = members
        positions = Dictionary(minimumCapacity: members.count)
        var duplicates = false
        for (position, member) in members.enumerated() {
            if positions[member.key] == nil { positions[member.key] = position } else { duplicates = true }
        }
        hasDuplicateNames = duplicates
    }

    /// Merges `patch` into the member named `key`; false when there is none.
    mutating func merge(_ patch: JSONValue, into key: String) -> Bool {
        guard let position = positions[key], let member = slots[position] else { return false }
        slots[position] = (key, member.value.merging(patch))
        return true
    }

    mutating func remove(_ key: String) {
        guard let position = positions.removeValue(forKey: key) else { return }
        slots[position] = nil
        guard hasDuplicateNames,
            let next = slots[(position + 1)...].firstIndex(where: { $0?.key == key })
        else { return }
        positions[key] = next
    }

    mutating func append(_ key: String, _ value: JSONValue) {
        if positions[key] == nil { positions[key] = slots.count }
        slots.append((key, value))
    }

    var ordered: [(key: String, value: JSONValue)] { slots.compactMap { $0 } }
}

/// A plugin's payload with the job's override for its provider merged in (`JSONValue.merging`).
public enum PayloadOverride {
    /// `bytes` (a JSON document the plugin wrote) with `patch` merged in; `bytes` unchanged without a patch.
    public static func apply(_ patch: JSONValue?, to bytes: [UInt8]) -> [UInt8] {
        guard let patch, let document = try? JSONParser.parse(bytes) else { return bytes }
        var writer = JSONWriter(capacity: bytes.count + 256)
        writer.value(document.merging(patch))
        return writer.bytes
    }

    /// Refuses a member of an override that would change what the core or the plugin must decide
    /// (a device token, a recipient): `paths` are member paths inside `override`.
    public static func refuse(
        _ paths: [[String]], in override: JSONValue, provider: ProviderID,
        because reason: String
    ) throws(JobRejection) {
        for path in paths where override.value(at: path) != nil {
            throw JobRejection(.invalidField, "overrides.\(provider).\(path.joined(separator: ".")) cannot be overridden: \(reason)")
        }
    }
}

extension JSONValue {
    /// The member at `path` (object keys, outermost first), nil when absent.
    public func value(at path: [String]) -> JSONValue? {
        var current = self
        for key in path {
            guard let next = current[key] else { return nil }
            current = next
        }
        return current
    }
}
