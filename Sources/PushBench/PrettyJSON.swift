import Foundation

extension Encodable {
    /// The value as indented JSON with sorted keys, for reports people and scripts both read.
    public func prettyJSON() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        return String(decoding: try encoder.encode(self), as: UTF8.self)
    }
}
