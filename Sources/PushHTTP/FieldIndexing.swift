import NIOHPACK

/// Which request fields one connection adds to its HPACK dynamic table (RFC 7541 §6.2.1), learnt
/// from the requests it sends. A field whose value changes from one request to the next (a message
/// id, a per-job expiry) is sent as a literal without indexing (§6.2.2): indexed, each value would
/// be used once and push the reusable fields (the provider token, the topic) out of the table, so
/// they would go in full again. A field keeps being indexed while its value repeats on at least
/// half of the requests that carry it.
struct FieldIndexing {
    private struct Field {
        var lastValue: String
        var sent: Int
        var repeated: Int

        mutating func count(_ value: String) -> HPACKIndexing {
            sent += 1
            if lastValue == value { repeated += 1 } else { lastValue = value }
            if sent >= FieldIndexing.window {
                sent /= 2
                repeated /= 2
            }
            // A field's first request has nothing to repeat: of its `sent` requests, `sent - 1` could have.
            return sent <= FieldIndexing.learningRequests || 2 * repeated >= sent - 1 ? .indexable : .nonIndexable
        }
    }

    /// Requests a field is indexed for before its values are judged.
    static let learningRequests = 4
    /// The counts are halved at this many requests, so a field that changes its habit is judged by its recent requests.
    static let window = 256
    /// Distinct field names followed; a field named beyond them is not indexed.
    static let maximumNames = 64

    private var fields: [String: Field] = [:]

    mutating func indexing(name: String, value: String) -> HPACKIndexing {
        // One hash of the name per field, the entry changed in place.
        guard let index = fields.index(forKey: name) else {
            guard fields.count < Self.maximumNames else { return .nonIndexable }
            fields[name] = Field(lastValue: value, sent: 1, repeated: 0)
            return .indexable
        }
        return fields.values[index].count(value)
    }
}
