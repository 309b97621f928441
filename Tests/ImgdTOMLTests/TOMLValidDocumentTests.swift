import ImgdTOML
import ImgdTestSupport
import Testing

/// Valid TOML 1.0 documents, mostly the specification's own examples (toml.io/en/v1.0.0),
/// each read and checked value by value.
@Suite("TOML 1.0: valid documents are read with their values", .offThePool)
struct TOMLValidDocumentTests {
    /// The value at `path` (`"#N"` picks element N of an array).
    static func value(_ document: TOMLDocument, _ path: String...) -> TOMLValue? {
        var value = TOMLValue.table(document.root)
        for key in path {
            switch value {
            case .table(let table):
                guard let entry = table[key] else { return nil }
                value = entry.value
            case .array(let items):
                guard key.hasPrefix("#"), let index = Int(key.dropFirst()), items.indices.contains(index) else { return nil }
                value = items[index]
            default:
                return nil
            }
        }
        return value
    }

    static func parse(_ text: String) throws -> TOMLDocument {
        do {
            return try TOMLDocument(parsing: text)
        } catch {
            Issue.record("refused: \(error)\n\(text)")
            throw error
        }
    }

    @Test("comments, whitespace, empty documents, CRLF, a byte order mark, no final line end")
    func layout() throws {
        #expect(try Self.parse("").root.entries.isEmpty)
        #expect(try Self.parse("# only a comment\n\n   \t\n# ünïcödé comment\t\n").root.entries.isEmpty)
        let document = try Self.parse("\u{FEFF}# This is a full-line comment\r\nkey = \"value\"  # a comment at the end\r\n\tother\t=\t1")
        #expect(Self.value(document, "key") == .string("value"))
        #expect(Self.value(document, "other") == .integer(1))
        #expect(document.root["other"]?.line == 3)
    }

    @Test("bare, quoted and dotted keys; the key's line is kept")
    func keys() throws {
        let document = try Self.parse("""
            key = 1
            bare_key = 2
            bare-key = 3
            1234 = 4
            "127.0.0.1" = 5
            "character encoding" = 6
            "ʎǝʞ" = 7
            'key2' = 8
            'quoted "value"' = 9
            "" = 10
            name = "Orange"
            physical.color = "orange"
            physical.shape = "round"
            site."google.com" = true
            fruit . flavor = "banana"
            3.14159 = "pi"
            apple.type = "fruit"
            orange.type = "fruit"
            apple.skin = "thin"
            "a\\u0041" = "escaped key"
            """)
        #expect(Self.value(document, "key") == .integer(1))
        #expect(Self.value(document, "bare_key") == .integer(2))
        #expect(Self.value(document, "bare-key") == .integer(3))
        #expect(Self.value(document, "1234") == .integer(4))
        #expect(Self.value(document, "127.0.0.1") == .integer(5))
        #expect(Self.value(document, "character encoding") == .integer(6))
        #expect(Self.value(document, "ʎǝʞ") == .integer(7))
        #expect(Self.value(document, "key2") == .integer(8))
        #expect(Self.value(document, "quoted \"value\"") == .integer(9))
        #expect(Self.value(document, "") == .integer(10))
        #expect(Self.value(document, "physical", "color") == .string("orange"))
        #expect(Self.value(document, "physical", "shape") == .string("round"))
        #expect(Self.value(document, "site", "google.com") == .boolean(true))
        #expect(Self.value(document, "fruit", "flavor") == .string("banana"))
        #expect(Self.value(document, "3", "14159") == .string("pi"))
        #expect(Self.value(document, "apple", "type") == .string("fruit"))
        #expect(Self.value(document, "apple", "skin") == .string("thin"))
        #expect(Self.value(document, "orange", "type") == .string("fruit"))
        #expect(Self.value(document, "aA") == .string("escaped key"))
        #expect(document.root["physical"]?.line == 12, "a table made by a dotted key has the line of that key")
        #expect(document.root.keys.prefix(4) == ["key", "bare_key", "bare-key", "1234"], "keys keep their order")
        if case .table(let site) = Self.value(document, "site") { #expect(site["google.com"]?.line == 14) }
    }

    @Test("basic strings and their escapes, \\u and \\U included")
    func basicStrings() throws {
        let document = try Self.parse(#"""
            str = "I'm a string. \"You can quote me\". Name\tJos\u00E9\nLocation\tSF."
            all = "\b\t\n\f\r\"\\"
            emoji = "\U0001F600 \u00e9"
            nul = "a\u0000b"
            tab = "a	b"
            unicode = "ünïcödé ✓"
            """#)
        #expect(Self.value(document, "str") == .string("I'm a string. \"You can quote me\". Name\tJosé\nLocation\tSF."))
        #expect(Self.value(document, "all") == .string("\u{8}\t\n\u{C}\r\"\\"))
        #expect(Self.value(document, "emoji") == .string("😀 é"))
        #expect(Self.value(document, "nul") == .string("a\u{0}b"))
        #expect(Self.value(document, "tab") == .string("a\tb"))
        #expect(Self.value(document, "unicode") == .string("ünïcödé ✓"))
    }

    @Test("multi-line basic strings: the first line end trimmed, line-ending backslashes, quotes inside")
    func multilineBasicStrings() throws {
        let document = try Self.parse(#"""
            str1 = """
            Roses are red
            Violets are blue"""
            str2 = """
            The quick brown \


              fox jumps over \
                the lazy dog."""
            str3 = """\
                   The quick brown \
                   fox jumps over \
                   the lazy dog.\
                   """
            str4 = """Here are two quotation marks: "". Simple enough."""
            str5 = """Here are three quotation marks: ""\"."""
            str6 = """Here are fifteen quotation marks: ""\"""\"""\"""\"""\"."""
            str7 = """"This," she said, "is just a pointless statement.""""
            crlf = """a\#r
            b"""
            spaces = """a \   
              b"""
            escapes = """\tx\u00e9"""
            after = 1
            """#)
        #expect(Self.value(document, "str1") == .string("Roses are red\nViolets are blue"))
        #expect(Self.value(document, "str2") == .string("The quick brown fox jumps over the lazy dog."))
        #expect(Self.value(document, "str3") == .string("The quick brown fox jumps over the lazy dog."))
        #expect(Self.value(document, "str4") == .string("Here are two quotation marks: \"\". Simple enough."))
        #expect(Self.value(document, "str5") == .string("Here are three quotation marks: \"\"\"."))
        #expect(Self.value(document, "str6") == .string("Here are fifteen quotation marks: " + String(repeating: "\"", count: 15) + "."))
        #expect(Self.value(document, "str7") == .string("\"This,\" she said, \"is just a pointless statement.\""))
        #expect(Self.value(document, "crlf") == .string("a\nb"))
        #expect(Self.value(document, "spaces") == .string("a b"))
        #expect(Self.value(document, "escapes") == .string("\txé"))
        #expect(document.root["after"]?.line == 24, "lines inside multi-line strings are counted")
    }

    @Test("literal strings, single- and multi-line, taken as written")
    func literalStrings() throws {
        let document = try Self.parse(#"""
            winpath  = 'C:\Users\nodejs\templates'
            winpath2 = '\\ServerX\admin$\system32\'
            quoted   = 'Tom "Dubs" Preston-Werner'
            regex    = '<\i\c*\s*>'
            regex2 = '''I [dw]on't need \d{2} apples'''
            lines  = '''
            The first newline is
            trimmed in raw strings.
               All other whitespace
               is preserved.
            '''
            quot15 = '''Here are fifteen quotation marks: """""""""""""""'''
            apos15 = "Here are fifteen apostrophes: '''''''''''''''"
            str = ''''That,' she said, 'is still pointless.''''
            empty = ''
            emptyMulti = ''''''
            """#)
        #expect(Self.value(document, "winpath") == .string(#"C:\Users\nodejs\templates"#))
        #expect(Self.value(document, "winpath2") == .string(#"\\ServerX\admin$\system32\"#))
        #expect(Self.value(document, "quoted") == .string(#"Tom "Dubs" Preston-Werner"#))
        #expect(Self.value(document, "regex") == .string(#"<\i\c*\s*>"#))
        #expect(Self.value(document, "regex2") == .string(#"I [dw]on't need \d{2} apples"#))
        #expect(Self.value(document, "lines") == .string("The first newline is\ntrimmed in raw strings.\n   All other whitespace\n   is preserved.\n"))
        #expect(Self.value(document, "quot15") == .string("Here are fifteen quotation marks: " + String(repeating: "\"", count: 15)))
        #expect(Self.value(document, "apos15") == .string("Here are fifteen apostrophes: " + String(repeating: "'", count: 15)))
        #expect(Self.value(document, "str") == .string("'That,' she said, 'is still pointless.'"))
        #expect(Self.value(document, "empty") == .string(""))
        #expect(Self.value(document, "emptyMulti") == .string(""))
    }

    @Test("integers: signs, underscores, hexadecimal, octal, binary, the 64-bit extremes")
    func integers() throws {
        let document = try Self.parse("""
            int1 = +99
            int2 = 42
            int3 = 0
            int4 = -17
            int5 = 1_000
            int6 = 5_349_221
            int7 = 53_49_221
            int8 = 1_2_3_4_5
            plus0 = +0
            minus0 = -0
            hex1 = 0xDEADBEEF
            hex2 = 0xdeadbeef
            hex3 = 0xdead_beef
            hex4 = 0x00ff
            oct1 = 0o01234567
            oct2 = 0o755
            bin1 = 0b11010110
            max = 9_223_372_036_854_775_807
            min = -9223372036854775808
            hexmax = 0x7FFFFFFFFFFFFFFF
            """)
        let expected: [(String, Int)] = [
            ("int1", 99), ("int2", 42), ("int3", 0), ("int4", -17), ("int5", 1000), ("int6", 5_349_221),
            ("int7", 5_349_221), ("int8", 12345), ("plus0", 0), ("minus0", 0), ("hex1", 0xDEADBEEF),
            ("hex2", 0xDEADBEEF), ("hex3", 0xDEADBEEF), ("hex4", 255), ("oct1", 0o1234567), ("oct2", 0o755),
            ("bin1", 0b11010110), ("max", Int.max), ("min", Int.min), ("hexmax", Int.max),
        ]
        for (key, number) in expected {
            #expect(Self.value(document, key) == .integer(number), "\(key)")
        }
    }

    @Test("floats: fractions, exponents, underscores, signed zero, inf and nan")
    func floats() throws {
        let document = try Self.parse("""
            flt1 = +1.0
            flt2 = 3.1415
            flt3 = -0.01
            flt4 = 5e+22
            flt5 = 1e06
            flt6 = -2E-2
            flt7 = 6.626e-34
            flt8 = 224_617.445_991_228
            flt9 = 0e0
            flt10 = 1_0.0_1e1_0
            zero = -0.0
            pzero = +0.0
            sf1 = inf
            sf2 = +inf
            sf3 = -inf
            sf4 = nan
            sf5 = +nan
            sf6 = -nan
            """)
        let expected: [(String, Double)] = [
            ("flt1", 1.0), ("flt2", 3.1415), ("flt3", -0.01), ("flt4", 5e22), ("flt5", 1e6), ("flt6", -2e-2),
            ("flt7", 6.626e-34), ("flt8", 224_617.445_991_228), ("flt9", 0), ("flt10", 10.01e10), ("zero", 0), ("pzero", 0),
            ("sf1", .infinity), ("sf2", .infinity), ("sf3", -.infinity),
        ]
        for (key, number) in expected {
            #expect(Self.value(document, key) == .float(number), "\(key)")
        }
        if case .float(let zero) = Self.value(document, "zero") { #expect(zero.sign == .minus) } else { Issue.record("zero") }
        for key in ["sf4", "sf5", "sf6"] {
            guard case .float(let number) = Self.value(document, key) else {
                Issue.record("\(key) is not a float")
                continue
            }
            #expect(number.isNaN, "\(key)")
        }
    }

    @Test("booleans")
    func booleans() throws {
        let document = try Self.parse("bool1 = true\nbool2 = false\n")
        #expect(Self.value(document, "bool1") == .boolean(true))
        #expect(Self.value(document, "bool2") == .boolean(false))
    }

    @Test("offset and local date-times, local dates, local times; T, t or a space; leap days and seconds")
    func dateTimes() throws {
        let document = try Self.parse("""
            odt1 = 1979-05-27T07:32:00Z
            odt2 = 1979-05-27T00:32:00-07:00
            odt3 = 1979-05-27T00:32:00.999999-07:00
            odt4 = 1979-05-27 07:32:00Z
            odt5 = 1979-05-27t07:32:00z
            odt6 = 1979-05-27T07:32:00+05:30
            ldt1 = 1979-05-27T07:32:00
            ldt2 = 1979-05-27T00:32:00.999999
            ld1 = 1979-05-27
            leap = 2000-02-29
            lt1 = 07:32:00
            lt2 = 00:32:00.999999
            lt3 = 23:59:60
            nanos = 00:00:00.1234567891
            inArray = [1979-05-27 07:32:00, 1979-05-27 ]
            """)
        let may27 = TOMLDate(year: 1979, month: 5, day: 27)
        #expect(Self.value(document, "odt1") == .dateTime(may27, TOMLTime(hour: 7, minute: 32, second: 0), offsetMinutes: 0))
        #expect(Self.value(document, "odt2") == .dateTime(may27, TOMLTime(hour: 0, minute: 32, second: 0), offsetMinutes: -420))
        #expect(
            Self.value(document, "odt3")
                == .dateTime(may27, TOMLTime(hour: 0, minute: 32, second: 0, nanosecond: 999_999_000), offsetMinutes: -420))
        #expect(Self.value(document, "odt4") == .dateTime(may27, TOMLTime(hour: 7, minute: 32, second: 0), offsetMinutes: 0))
        #expect(Self.value(document, "odt5") == .dateTime(may27, TOMLTime(hour: 7, minute: 32, second: 0), offsetMinutes: 0))
        #expect(Self.value(document, "odt6") == .dateTime(may27, TOMLTime(hour: 7, minute: 32, second: 0), offsetMinutes: 330))
        #expect(Self.value(document, "ldt1") == .dateTime(may27, TOMLTime(hour: 7, minute: 32, second: 0), offsetMinutes: nil))
        #expect(
            Self.value(document, "ldt2")
                == .dateTime(may27, TOMLTime(hour: 0, minute: 32, second: 0, nanosecond: 999_999_000), offsetMinutes: nil))
        #expect(Self.value(document, "ld1") == .date(may27))
        #expect(Self.value(document, "leap") == .date(TOMLDate(year: 2000, month: 2, day: 29)))
        #expect(Self.value(document, "lt1") == .time(TOMLTime(hour: 7, minute: 32, second: 0)))
        #expect(Self.value(document, "lt2") == .time(TOMLTime(hour: 0, minute: 32, second: 0, nanosecond: 999_999_000)))
        #expect(Self.value(document, "lt3") == .time(TOMLTime(hour: 23, minute: 59, second: 60)))
        #expect(Self.value(document, "nanos") == .time(TOMLTime(hour: 0, minute: 0, second: 0, nanosecond: 123_456_789)))
        #expect(
            Self.value(document, "inArray")
                == .array([.dateTime(may27, TOMLTime(hour: 7, minute: 32, second: 0), offsetMinutes: nil), .date(may27)]))
        #expect(Self.value(document, "odt3")?.description == "1979-05-27T00:32:00.999999-07:00")
    }

    @Test("arrays: nested, mixed types, over several lines with comments and a trailing comma")
    func arrays() throws {
        let document = try Self.parse("""
            integers = [ 1, 2, 3 ]
            colors = [ "red", "yellow", "green" ]
            nested_arrays_of_ints = [ [ 1, 2 ], [3, 4, 5] ]
            nested_mixed_array = [ [ 1, 2 ], ["a", "b", "c"] ]
            string_array = [ "all", 'strings', \"""are the same\""", '''type''' ]
            numbers = [ 0.1, 0.2, 0.5, 1, 2, 5 ]
            contributors = [
              "Foo Bar <foo@example.com>",
              { name = "Baz Qux", email = "bazqux@example.com", url = "https://example.com/bazqux" }
            ]
            integers2 = [
              1, 2, 3
            ]
            integers3 = [
              1,
              2, # this is ok
            ]
            empty = []
            emptyWithComment = [ # nothing
            ]
            after = true
            """)
        #expect(Self.value(document, "integers") == .array([.integer(1), .integer(2), .integer(3)]))
        #expect(Self.value(document, "colors") == .array([.string("red"), .string("yellow"), .string("green")]))
        #expect(
            Self.value(document, "nested_arrays_of_ints")
                == .array([.array([.integer(1), .integer(2)]), .array([.integer(3), .integer(4), .integer(5)])]))
        #expect(Self.value(document, "nested_mixed_array", "#1", "#2") == .string("c"))
        #expect(Self.value(document, "string_array") == .array(["all", "strings", "are the same", "type"].map(TOMLValue.string)))
        #expect(Self.value(document, "numbers", "#3") == .integer(1))
        #expect(Self.value(document, "numbers", "#0") == .float(0.1))
        #expect(Self.value(document, "contributors", "#0") == .string("Foo Bar <foo@example.com>"))
        #expect(Self.value(document, "contributors", "#1", "email") == .string("bazqux@example.com"))
        #expect(Self.value(document, "integers2") == .array([.integer(1), .integer(2), .integer(3)]))
        #expect(Self.value(document, "integers3") == .array([.integer(1), .integer(2)]))
        #expect(Self.value(document, "empty") == .array([]))
        #expect(Self.value(document, "emptyWithComment") == .array([]))
        #expect(document.root["after"]?.line == 21)
    }

    @Test("tables: headers, quoted and spaced names, super-tables after sub-tables, dotted keys inside")
    func tables() throws {
        let document = try Self.parse("""
            top = 0
            [table-1]
            key1 = "some string"
            key2 = 123

            [table-2]
            key1 = "another string"
            key2 = 456

            [dog."tater.man"]
            type.name = "pug"

            [a.b.c]
            [ d.e.f ]
            [ g .  h  . i ]
            [ j . "ʞ" . 'l' ]

            [x.y.z.w]
            [x]
            inX = 1

            [fruit]
            apple.color = "red"
            apple.taste.sweet = true
            [fruit.apple.texture]
            smooth = true
            """)
        #expect(Self.value(document, "top") == .integer(0))
        #expect(Self.value(document, "table-1", "key2") == .integer(123))
        #expect(Self.value(document, "table-2", "key1") == .string("another string"))
        #expect(Self.value(document, "dog", "tater.man", "type", "name") == .string("pug"))
        #expect(Self.value(document, "a", "b", "c") == .table(try Self.parse("").root))
        #expect(Self.value(document, "d", "e", "f") != nil)
        #expect(Self.value(document, "g", "h", "i") != nil)
        #expect(Self.value(document, "j", "ʞ", "l") != nil)
        #expect(Self.value(document, "x", "y", "z", "w") != nil)
        #expect(Self.value(document, "x", "inX") == .integer(1))
        #expect(Self.value(document, "fruit", "apple", "color") == .string("red"))
        #expect(Self.value(document, "fruit", "apple", "taste", "sweet") == .boolean(true))
        #expect(Self.value(document, "fruit", "apple", "texture", "smooth") == .boolean(true))
        #expect(document.root["table-2"]?.line == 6, "a table's line is its header's")
        #expect(document.root["x"]?.line == 19, "a table defined after its sub-table takes its own header's line")
        #expect(document.root.keys == ["top", "table-1", "table-2", "dog", "a", "d", "g", "j", "x", "fruit"])
    }

    @Test("inline tables: flat, nested, dotted keys inside, empty")
    func inlineTables() throws {
        let document = try Self.parse("""
            name = { first = "Tom", last = "Preston-Werner" }
            point = { x = 1, y = 2 }
            animal = { type.name = "pug" }
            empty = {}
            spaced = {   }
            nested = { a = { b = [1, { c = "d" }] } }
            multi = { s = \"""
            two lines\""" }
            """)
        #expect(Self.value(document, "name", "first") == .string("Tom"))
        #expect(Self.value(document, "name", "last") == .string("Preston-Werner"))
        #expect(Self.value(document, "point", "y") == .integer(2))
        #expect(Self.value(document, "animal", "type", "name") == .string("pug"))
        #expect(Self.value(document, "empty") == .table(try Self.parse("").root))
        #expect(Self.value(document, "spaced") == .table(try Self.parse("").root))
        #expect(Self.value(document, "nested", "a", "b", "#1", "c") == .string("d"))
        #expect(Self.value(document, "multi", "s") == .string("two lines"))
    }

    @Test("arrays of tables: elements, sub-tables and nested arrays go to the last element")
    func arraysOfTables() throws {
        let document = try Self.parse("""
            [[products]]
            name = "Hammer"
            sku = 738594937

            [[products]]  # empty table within the array

            [[products]]
            name = "Nail"
            sku = 284758393

            color = "gray"

            [[fruits]]
            name = "apple"

            [fruits.physical]  # subtable
            color = "red"
            shape = "round"

            [[fruits.varieties]]  # nested array of tables
            name = "red delicious"

            [[fruits.varieties]]
            name = "granny smith"

            [[fruits]]
            name = "banana"

            [[fruits.varieties]]
            name = "plantain"

            [more]
            points = [ { x = 1, y = 2, z = 3 },
                       { x = 7, y = 8, z = 9 },
                       { x = 2, y = 4, z = 8 } ]
            """)
        guard case .array(let products) = Self.value(document, "products") else {
            Issue.record("products is not an array")
            return
        }
        #expect(products.count == 3)
        #expect(Self.value(document, "products", "#0", "name") == .string("Hammer"))
        #expect(Self.value(document, "products", "#1") == .table(try Self.parse("").root))
        #expect(Self.value(document, "products", "#2", "color") == .string("gray"))
        #expect(Self.value(document, "fruits", "#0", "physical", "shape") == .string("round"))
        #expect(Self.value(document, "fruits", "#0", "varieties", "#1", "name") == .string("granny smith"))
        #expect(Self.value(document, "fruits", "#1", "name") == .string("banana"))
        #expect(Self.value(document, "fruits", "#1", "varieties", "#0", "name") == .string("plantain"))
        #expect(Self.value(document, "fruits", "#1", "physical") == nil)
        #expect(Self.value(document, "more", "points", "#2", "z") == .integer(8))
        #expect(document.root["products"]?.line == 1, "an array of tables has the line of its first header")

        // Each element takes its own sub-table of the same name.
        let repeated = try Self.parse("[[a]]\n[a.b]\nx = 1\n[[a]]\n[a.b]\nx = 2\n[[a.c]]\n")
        #expect(Self.value(repeated, "a", "#0", "b", "x") == .integer(1))
        #expect(Self.value(repeated, "a", "#1", "b", "x") == .integer(2))
        #expect(Self.value(repeated, "a", "#1", "c", "#0") == .table(try Self.parse("").root))
    }

    @Test("nested settings of the shape the per-host issues need, with the line of every key")
    func perHostShape() throws {
        let document = try Self.parse("""
            max-parallel = 8

            [host."images.example.com"]
            max-per-host = 2
            headers = { Authorization = "Bearer abc", "X-Trace" = "1" }
            """)
        guard case .table(let hosts) = Self.value(document, "host"), let host = hosts["images.example.com"],
            case .table(let settings) = host.value
        else {
            Issue.record("no [host.\"images.example.com\"] table")
            return
        }
        #expect(host.line == 3)
        #expect(settings["max-per-host"]?.line == 4)
        #expect(settings["headers"]?.line == 5)
        #expect(Self.value(document, "host", "images.example.com", "headers", "Authorization") == .string("Bearer abc"))
    }
}
