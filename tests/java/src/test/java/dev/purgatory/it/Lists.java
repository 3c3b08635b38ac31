package dev.purgatory.it;

import java.util.List;

import static org.junit.jupiter.api.Assertions.fail;

/** List comparison whose failure says where the lists part, not thousands of elements. */
public final class Lists {
    private Lists() {
    }

    public static <T> void assertSameList(List<T> expected, List<T> actual, String what) {
        int common = Math.min(expected.size(), actual.size());
        for (int i = 0; i < common; i++) {
            if (!expected.get(i).equals(actual.get(i))) {
                fail(what + ": first difference at index " + i + ": expected " + expected.get(i) + " but got "
                        + actual.get(i) + " (" + expected.size() + " expected, " + actual.size() + " got)");
            }
        }
        if (expected.size() != actual.size()) {
            List<T> longer = expected.size() > actual.size() ? expected : actual;
            fail(what + ": " + expected.size() + " expected, " + actual.size() + " got; the first "
                    + (expected.size() > actual.size() ? "missing" : "extra") + " is " + longer.get(common));
        }
    }
}
