"""Raises KeyboardInterrupt from inside a function, as Ctrl-C in a loop would."""


def work(n):
    total = 0
    for i in range(n):
        if i == 3:
            raise KeyboardInterrupt
        total += i
    return total


print("working")
work(10)
