extension String {
    /// Whether it holds a C0 control character (CR, LF, tab, NUL, …) or DEL: what `Fields.Content.identifier`
    /// refuses, since such a character in an HTTP header or URL would end it or start another.
    @inlinable
    public var containsControlCharacter: Bool { containsUTF8Byte { $0 < 0x20 || $0 == 0x7F } }

    /// Whether any byte of the string's UTF-8 matches, read from its contiguous storage when it has one
    /// (native strings do): job fields, request fields and header names pass here on every request.
    @inlinable
    public func containsUTF8Byte(where matches: (UInt8) -> Bool) -> Bool {
        utf8.withContiguousStorageIfAvailable { $0.contains(where: matches) } ?? utf8.contains(where: matches)
    }
}
